// Package diskguard limits what a set of spools may take of their host's
// disk: spools live on business hosts whose disks must not be overrun by a
// backlog. A Guard's goroutine measures the spools and the file system
// every Interval and, when a limit is broken, either refuses appends
// (Allow returns an error wrapping ErrDiskFull) or deletes the oldest
// whole segments of the largest spools (DropOldest).
//
// A fastmq.Node runs one over its streams (fastmq.Config.DiskGuard is a
// Limits).
package diskguard

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/spool"
)

// ErrDiskFull reports an append refused by a disk guard; the error says
// which limit was reached. Nothing of the refused records was written.
var ErrDiskFull = errors.New("fastmq: disk full")

// Policy says what a disk guard does when a limit is reached.
type Policy int

// Disk policies.
const (
	// Refuse refuses new appends with ErrDiskFull until space is freed
	// (retention, a consumer catching up does not free any, an operator
	// does). It is the default.
	Refuse Policy = iota
	// DropOldest deletes the oldest whole segments of the largest
	// streams until the limits hold again, whatever their retention and
	// whether consumers read them; appends are refused only when nothing
	// more can be dropped.
	DropOldest
)

// String returns "refuse" or "drop-oldest".
func (p Policy) String() string {
	if p == DropOldest {
		return "drop-oldest"
	}
	return "refuse"
}

// Limits are what a guard enforces. The zero value refuses appends while
// the file system under the guarded directory has less than 5 % free.
//
// The guard checks its limits every Interval, not on every append: an
// append costs one atomic load, so the spools may overshoot a limit by
// what is appended in one Interval. Appends that do not ask the guard
// (through a *spool.Log the caller holds) are not checked.
type Limits struct {
	// MaxBytes limits the bytes of all the guarded spools together.
	// 0 = no limit.
	MaxBytes int64
	// MinFreeBytes is the free space the file system under the guarded
	// directory must keep. 0 = none in bytes (MinFreePercent applies).
	MinFreeBytes int64
	// MinFreePercent is the share of the file system that must stay free,
	// in percent. 0 = 5 %; negative = none.
	MinFreePercent float64
	// Policy when a limit is reached. Default Refuse.
	Policy Policy
	// WarnPercent is the high-water mark: a warning is logged (once per
	// crossing) when the spools reach this share of MaxBytes, or the free
	// space comes within this share of its minimum. 0 = 90 %.
	WarnPercent float64
	// Interval is how often the limits are checked. Default 1s.
	Interval time.Duration
}

// Config configures a Guard. Dir and Logs are required.
type Config struct {
	// Limits are the limits and policy enforced.
	Limits
	// Dir is a directory on the file system whose free space is guarded.
	Dir string
	// Logs returns the spools guarded now, by stream name; the guard
	// calls it every Interval, from its goroutine, and only reads the map.
	Logs func() map[string]*spool.Log
	// Logger receives the guard's logs; nil discards them.
	Logger *slog.Logger
}

// Status is the state of a guard.
type Status struct {
	Policy       string `json:"policy"`
	MaxBytes     int64  `json:"max_bytes"`      // 0 = no limit
	MinFreeBytes uint64 `json:"min_free_bytes"` // the larger of MinFreeBytes and MinFreePercent of the disk
	// Refusing is the error appends get now ("" = appends go through).
	Refusing        string `json:"refusing,omitempty"`
	Warning         bool   `json:"warning"`          // over the high-water mark
	DroppedSegments uint64 `json:"dropped_segments"` // deleted under DropOldest
	DroppedBytes    uint64 `json:"dropped_bytes"`
	Refused         uint64 `json:"refused"` // appends refused
}

// Guard is a running disk guard: a goroutine refreshes the limits' state;
// Allow reads it with one atomic load. It is safe for concurrent use;
// Close is idempotent.
type Guard struct {
	cfg     Config
	log     *slog.Logger
	refuse  atomic.Pointer[error] // nil: appends go through
	refused atomic.Uint64
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once

	mu      sync.Mutex // guards the fields below
	warning bool
	minFree uint64
	dropped uint64
	dropB   uint64
}

// New checks the limits once, then starts the guard's goroutine, which
// checks them every Interval until Close.
func New(cfg Config) (*Guard, error) {
	if cfg.Dir == "" {
		return nil, errors.New("diskguard: no directory")
	}
	if cfg.Logs == nil {
		return nil, errors.New("diskguard: no Logs")
	}
	if cfg.MinFreePercent == 0 {
		cfg.MinFreePercent = 5
	}
	if cfg.WarnPercent <= 0 || cfg.WarnPercent > 100 {
		cfg.WarnPercent = 90
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	g := &Guard{cfg: cfg, log: lg, stop: make(chan struct{}), done: make(chan struct{})}
	g.check()
	go g.run()
	return g, nil
}

// Close stops the guard's goroutine and waits for it. Allow and Status
// keep answering with the last state.
func (g *Guard) Close() {
	g.once.Do(func() { close(g.stop) })
	<-g.done
}

// Allow returns the error an append gets now (wrapping ErrDiskFull), or
// nil, and counts the refusals.
func (g *Guard) Allow() error {
	if e := g.refuse.Load(); e != nil {
		g.refused.Add(1)
		return *e
	}
	return nil
}

func (g *Guard) run() {
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

func (g *Guard) measure() usage {
	u := usage{logs: g.cfg.Logs()}
	for _, l := range u.logs {
		u.bytes += l.Bytes()
	}
	u.total, u.free, u.statErr = Space(g.cfg.Dir)
	return u
}

// minFreeOf returns the free space a disk of total bytes must keep.
func (g *Guard) minFreeOf(total uint64) uint64 {
	m := uint64(max(g.cfg.MinFreeBytes, 0))
	if g.cfg.MinFreePercent > 0 {
		m = max(m, uint64(float64(total)*g.cfg.MinFreePercent/100))
	}
	return m
}

// over returns the error for the first limit u breaks, or nil.
func (g *Guard) over(u usage) error {
	if g.cfg.MaxBytes > 0 && u.bytes >= g.cfg.MaxBytes {
		return fmt.Errorf("%w: the stream spools hold %d bytes, the node's limit (DiskGuard.MaxBytes) is %d", ErrDiskFull, u.bytes, g.cfg.MaxBytes)
	}
	if u.statErr == nil {
		if m := g.minFreeOf(u.total); u.free < m {
			return fmt.Errorf("%w: %d bytes free on the disk of %s, under the %d to keep free (DiskGuard.MinFreeBytes %d, MinFreePercent %g of %d)",
				ErrDiskFull, u.free, g.cfg.Dir, m, g.cfg.MinFreeBytes, g.cfg.MinFreePercent, u.total)
		}
	}
	return nil
}

// check measures, drops segments under DropOldest, and sets what appends
// get.
func (g *Guard) check() {
	u := g.measure()
	err := g.over(u)
	if err != nil && g.cfg.Policy == DropOldest {
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
			g.log.Info("disk guard: appends accepted again", "bytes", u.bytes, "free", u.free)
		}
	} else {
		g.refuse.Store(&err)
		if prev == nil {
			g.log.Error("disk guard: refusing appends", "err", err)
		}
	}
	g.mu.Lock()
	was := g.warning
	g.warning, g.minFree = warn, g.minFreeOf(u.total)
	g.mu.Unlock()
	if warn && !was {
		g.log.Warn("disk guard: high-water mark reached", "bytes", u.bytes, "max_bytes", g.cfg.MaxBytes, "free", u.free, "min_free", g.minFreeOf(u.total))
	}
}

// drop deletes the oldest segments of the largest streams until u is
// within the limits or nothing more can go; it returns the error of the
// limit still broken, or nil.
func (g *Guard) drop(u *usage) error {
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
				g.log.Error("disk guard: drop segment", "stream", name, "err", derr)
			}
			if seg == "" {
				delete(sizes, name) // nothing more to drop there
				continue
			}
			g.log.Warn("disk guard: dropped the oldest segment of the largest stream", "stream", name, "segment", seg, "bytes", size, "reason", err)
			g.mu.Lock()
			g.dropped++
			g.dropB += uint64(size)
			g.mu.Unlock()
			sizes[name] -= size
			u.bytes -= size
			if u.statErr == nil {
				u.total, u.free, u.statErr = Space(g.cfg.Dir)
			}
			dropped = true
			break
		}
		if !dropped {
			return err
		}
	}
}

// Status returns the guard's state.
func (g *Guard) Status() Status {
	st := Status{Policy: g.cfg.Policy.String(), MaxBytes: g.cfg.MaxBytes, Refused: g.refused.Load()}
	if e := g.refuse.Load(); e != nil {
		st.Refusing = (*e).Error()
	}
	g.mu.Lock()
	st.Warning, st.MinFreeBytes, st.DroppedSegments, st.DroppedBytes = g.warning, g.minFree, g.dropped, g.dropB
	g.mu.Unlock()
	return st
}
