package fastmq

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/spool"
)

// ErrDiskFull reports an append refused by the node's disk guard (see
// DiskGuard); the error says which limit was reached. Nothing of the
// refused records was written.
var ErrDiskFull = errors.New("fastmq: disk full")

// DiskPolicy says what a node's disk guard does when a limit is reached.
type DiskPolicy int

// Disk policies.
const (
	// DiskRefuse refuses new appends (Publish, PublishAsync, Append) with
	// ErrDiskFull until space is freed (retention, a consumer catching up
	// does not free any, an operator does). It is the default.
	DiskRefuse DiskPolicy = iota
	// DiskDropOldest deletes the oldest whole segments of the largest
	// streams until the limits hold again, whatever their retention and
	// whether consumers read them; appends are refused only when nothing
	// more can be dropped.
	DiskDropOldest
)

// String returns "refuse" or "drop-oldest".
func (p DiskPolicy) String() string {
	if p == DiskDropOldest {
		return "drop-oldest"
	}
	return "refuse"
}

// DiskGuard limits what a node's spools may take of its host's disk: spools
// live on business hosts whose disks must not be overrun by a backlog. The
// zero value refuses appends while the file system under DataDir has less
// than 5 % free.
//
// The guard checks its limits every Interval, not on every append: an
// append costs one atomic load, so the spools may overshoot a limit by
// what is appended in one Interval. Appends through a *spool.Log the
// caller got from Node.Stream are not checked.
type DiskGuard struct {
	// MaxBytes limits the bytes of all the node's stream spools together.
	// 0 = no limit.
	MaxBytes int64
	// MinFreeBytes is the free space the file system under DataDir must
	// keep. 0 = none in bytes (MinFreePercent applies).
	MinFreeBytes int64
	// MinFreePercent is the share of the file system that must stay free,
	// in percent. 0 = 5 %; negative = none.
	MinFreePercent float64
	// Policy when a limit is reached. Default DiskRefuse.
	Policy DiskPolicy
	// WarnPercent is the high-water mark: a warning is logged (once per
	// crossing) when the spools reach this share of MaxBytes, or the free
	// space comes within this share of its minimum. 0 = 90 %.
	WarnPercent float64
	// Interval is how often the limits are checked. Default 1s.
	Interval time.Duration
}

// DiskGuardStatus is the state of the node's disk guard, in Status.
type DiskGuardStatus struct {
	Policy       string `json:"policy"`
	MaxBytes     int64  `json:"max_bytes"`      // 0 = no limit
	MinFreeBytes uint64 `json:"min_free_bytes"` // the larger of MinFreeBytes and MinFreePercent of the disk
	// Refusing is the error appends get now ("" = appends go through).
	Refusing        string `json:"refusing,omitempty"`
	Warning         bool   `json:"warning"`          // over the high-water mark
	DroppedSegments uint64 `json:"dropped_segments"` // deleted under DiskDropOldest
	DroppedBytes    uint64 `json:"dropped_bytes"`
	Refused         uint64 `json:"refused"` // appends refused
}

// diskGuard is a node's running disk guard: a goroutine refreshes the
// limits' state; appends read it with one atomic load.
type diskGuard struct {
	cfg     DiskGuard
	n       *Node
	refuse  atomic.Pointer[error] // nil: appends go through
	refused atomic.Uint64
	stop    chan struct{}
	done    chan struct{}

	mu      sync.Mutex // guards the fields below
	warning bool
	minFree uint64
	dropped uint64
	dropB   uint64
}

// startDiskGuard starts the guard of n; stopDiskGuard stops it.
func (n *Node) startDiskGuard() {
	cfg := n.cfg.DiskGuard
	if cfg.MinFreePercent == 0 {
		cfg.MinFreePercent = 5
	}
	if cfg.WarnPercent <= 0 || cfg.WarnPercent > 100 {
		cfg.WarnPercent = 90
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	g := &diskGuard{cfg: cfg, n: n, stop: make(chan struct{}), done: make(chan struct{})}
	n.guard = g
	g.check()
	go g.run()
}

func (g *diskGuard) close() {
	close(g.stop)
	<-g.done
}

// allow returns the error an append gets now, or nil.
func (g *diskGuard) allow() error {
	if e := g.refuse.Load(); e != nil {
		g.refused.Add(1)
		return *e
	}
	return nil
}

func (g *diskGuard) run() {
	defer close(g.done)
	t := time.NewTicker(g.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
			g.check()
		}
	}
}

// usage is what the guard measures: the streams' bytes and the disk.
type usage struct {
	logs        map[string]*spool.Log
	bytes       int64
	total, free uint64
	statErr     error
}

func (g *diskGuard) measure() usage {
	u := usage{logs: map[string]*spool.Log{}}
	g.n.mu.Lock()
	for name, l := range g.n.streams {
		u.logs[name] = l
	}
	g.n.mu.Unlock()
	for _, l := range u.logs {
		u.bytes += l.Bytes()
	}
	u.total, u.free, u.statErr = diskSpace(g.n.cfg.DataDir)
	return u
}

// minFree returns the free space the disk must keep.
func (g *diskGuard) minFreeOf(total uint64) uint64 {
	m := uint64(max(g.cfg.MinFreeBytes, 0))
	if g.cfg.MinFreePercent > 0 {
		m = max(m, uint64(float64(total)*g.cfg.MinFreePercent/100))
	}
	return m
}

// over returns the error for the first limit u breaks, or nil.
func (g *diskGuard) over(u usage) error {
	if g.cfg.MaxBytes > 0 && u.bytes >= g.cfg.MaxBytes {
		return fmt.Errorf("%w: the stream spools hold %d bytes, the node's limit (DiskGuard.MaxBytes) is %d", ErrDiskFull, u.bytes, g.cfg.MaxBytes)
	}
	if u.statErr == nil {
		if m := g.minFreeOf(u.total); u.free < m {
			return fmt.Errorf("%w: %d bytes free on the disk of %s, under the %d to keep free (DiskGuard.MinFreeBytes %d, MinFreePercent %g of %d)",
				ErrDiskFull, u.free, g.n.cfg.DataDir, m, g.cfg.MinFreeBytes, g.cfg.MinFreePercent, u.total)
		}
	}
	return nil
}

// check measures, drops segments under DiskDropOldest, and sets what
// appends get.
func (g *diskGuard) check() {
	u := g.measure()
	err := g.over(u)
	if err != nil && g.cfg.Policy == DiskDropOldest {
		err = g.drop(&u)
	}
	warn := g.cfg.MaxBytes > 0 && float64(u.bytes) >= float64(g.cfg.MaxBytes)*g.cfg.WarnPercent/100
	if u.statErr == nil && g.cfg.WarnPercent < 100 {
		if m := g.minFreeOf(u.total); m > 0 && float64(u.free) < float64(m)*100/g.cfg.WarnPercent {
			warn = true
		}
	}
	prev := g.refuse.Load()
	if err == nil {
		g.refuse.Store(nil)
		if prev != nil {
			g.n.log.Info("disk guard: appends accepted again", "bytes", u.bytes, "free", u.free)
		}
	} else {
		g.refuse.Store(&err)
		if prev == nil {
			g.n.log.Error("disk guard: refusing appends", "err", err)
		}
	}
	g.mu.Lock()
	was := g.warning
	g.warning, g.minFree = warn, g.minFreeOf(u.total)
	g.mu.Unlock()
	if warn && !was {
		g.n.log.Warn("disk guard: high-water mark reached", "bytes", u.bytes, "max_bytes", g.cfg.MaxBytes, "free", u.free, "min_free", g.minFreeOf(u.total))
	}
}

// drop deletes the oldest segments of the largest streams until u is
// within the limits or nothing more can go; it returns the error of the
// limit still broken, or nil.
func (g *diskGuard) drop(u *usage) error {
	sizes := make(map[string]int64, len(u.logs))
	for name, l := range u.logs {
		sizes[name] = l.Bytes()
	}
	for {
		err := g.over(*u)
		if err == nil {
			return nil
		}
		names := make([]string, 0, len(sizes))
		for name := range sizes {
			names = append(names, name)
		}
		sort.Slice(names, func(i, j int) bool { return sizes[names[i]] > sizes[names[j]] })
		dropped := false
		for _, name := range names {
			seg, size, derr := u.logs[name].DropOldestSegment()
			if derr != nil {
				g.n.log.Error("disk guard: drop segment", "topic", name, "err", derr)
			}
			if seg == "" {
				delete(sizes, name) // nothing more to drop there
				continue
			}
			g.n.log.Warn("disk guard: dropped the oldest segment of the largest stream", "topic", name, "segment", seg, "bytes", size, "reason", err)
			g.mu.Lock()
			g.dropped++
			g.dropB += uint64(size)
			g.mu.Unlock()
			sizes[name] -= size
			u.bytes -= size
			if u.statErr == nil {
				u.total, u.free, u.statErr = diskSpace(g.n.cfg.DataDir)
			}
			dropped = true
			break
		}
		if !dropped {
			return err
		}
	}
}

// status returns the guard's state for Status.
func (g *diskGuard) status() DiskGuardStatus {
	st := DiskGuardStatus{Policy: g.cfg.Policy.String(), MaxBytes: g.cfg.MaxBytes, Refused: g.refused.Load()}
	if e := g.refuse.Load(); e != nil {
		st.Refusing = (*e).Error()
	}
	g.mu.Lock()
	st.Warning, st.MinFreeBytes, st.DroppedSegments, st.DroppedBytes = g.warning, g.minFree, g.dropped, g.dropB
	g.mu.Unlock()
	return st
}
