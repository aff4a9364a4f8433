package fastmq

import (
	"sort"
	"sync"
	"time"
)

// InterestConfig configures interest retention and the report of consumer
// groups far behind. The zero value keeps retention by age and size alone
// and reports groups more than the default distances behind.
type InterestConfig struct {
	// Retain turns on interest retention for every stream of the node:
	// a stream keeps its records until every consumer group this node
	// knows for it (those it serves and those it keeps state for) has
	// acknowledged them, and deletes them, whole segments at a time, at
	// the next retention pass (Spool.RetentionInterval, and after each
	// segment roll) once all have. Spool.RetentionAge and
	// Spool.RetentionBytes cap it: past them records go even if a group
	// has not acknowledged them, which is logged and reported (see
	// GroupBehind.Capped). A stream no group reads is kept by age and size
	// alone. Plain consumers keep their own positions, unknown to the
	// publisher: with Retain, records they have not read yet may go once
	// every group has them.
	Retain bool
	// BehindRecords and BehindBytes: a group more than this many records
	// (default 1,000,000) or bytes (default 1 GiB) behind the head of a
	// stream is far behind. Negative turns that measure off.
	BehindRecords int64
	BehindBytes   int64
	// CheckInterval is how often the node looks for groups far behind, to
	// log once when a group crosses the threshold and once when it is
	// back (default 10 s). Status and the metrics look when asked.
	CheckInterval time.Duration
}

// GroupBehind describes a consumer group far behind on one of this
// node's streams.
type GroupBehind struct {
	Stream string `json:"stream"`
	Group  string `json:"group"`
	// Floor: every record below is acknowledged (or dead-lettered) by the
	// group; Records and Bytes: how far that is from the head.
	Floor   uint64 `json:"floor"`
	Records uint64 `json:"records"`
	Bytes   int64  `json:"bytes"`
	// Capped: retention's cap (age or size) removed records the group had
	// not acknowledged: the stream's oldest offset is above its floor.
	Capped bool `json:"capped,omitempty"`
}

func (c InterestConfig) normalize() InterestConfig {
	if c.BehindRecords == 0 {
		c.BehindRecords = 1_000_000
	}
	if c.BehindBytes == 0 {
		c.BehindBytes = 1 << 30
	}
	if c.CheckInterval <= 0 {
		c.CheckInterval = 10 * time.Second
	}
	return c
}

// groupFloors returns the floors of the groups this node knows on stream
// (nil before the group server runs).
func (n *Node) groupFloors(stream string) map[string]uint64 {
	n.groupsMu.Lock()
	h := n.groups
	n.groupsMu.Unlock()
	if h == nil {
		return nil
	}
	return h.srv.Floors(stream)
}

// interestFloor is a stream's spool.Config.RetentionFloor: the least floor
// of its groups.
func (n *Node) interestFloor(stream string) func() (uint64, bool) {
	return func() (uint64, bool) {
		floors := n.groupFloors(stream)
		if len(floors) == 0 {
			return 0, false
		}
		least := ^uint64(0)
		for _, f := range floors {
			least = min(least, f)
		}
		return least, true
	}
}

// GroupsBehind returns the consumer groups far behind on this node's
// streams (see InterestConfig), by stream and group.
func (n *Node) GroupsBehind() []GroupBehind {
	cfg := n.cfg.Interest.normalize()
	n.mu.Lock()
	names := n.streamNamesLocked()
	n.mu.Unlock()
	var out []GroupBehind
	for _, name := range names {
		l, ok := n.lookupStream(name)
		if !ok {
			continue
		}
		next, oldest := l.NextOffset(), l.OldestOffset()
		for g, floor := range n.groupFloors(name) {
			b := GroupBehind{Stream: name, Group: g, Floor: floor, Capped: floor < oldest}
			if floor < next {
				b.Records = next - floor
				b.Bytes = l.BytesFrom(max(floor, oldest))
			}
			far := (cfg.BehindRecords > 0 && b.Records > uint64(cfg.BehindRecords)) ||
				(cfg.BehindBytes > 0 && b.Bytes > cfg.BehindBytes)
			if far || b.Capped {
				out = append(out, b)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Stream != out[j].Stream {
			return out[i].Stream < out[j].Stream
		}
		return out[i].Group < out[j].Group
	})
	return out
}

// interestWatch logs groups as they cross the far-behind threshold.
type interestWatch struct {
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// startInterest starts the node's far-behind watch (New).
func (n *Node) startInterest() {
	w := &interestWatch{stop: make(chan struct{})}
	n.interest = w
	every := n.cfg.Interest.normalize().CheckInterval
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		behind := map[[2]string]bool{}
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
			behind = n.logGroupsBehind(behind)
		}
	}()
}

// logGroupsBehind logs the groups that became far behind since the last
// look (was), and those back, and returns the groups far behind now.
func (n *Node) logGroupsBehind(was map[[2]string]bool) map[[2]string]bool {
	now := map[[2]string]bool{}
	for _, b := range n.GroupsBehind() {
		k := [2]string{b.Stream, b.Group}
		now[k] = true
		if !was[k] {
			n.log.Warn("consumer group far behind", "stream", b.Stream, "group", b.Group, "offset", b.Floor,
				"records", b.Records, "bytes", b.Bytes, "capped", b.Capped)
		}
	}
	for k := range was {
		if !now[k] {
			n.log.Info("consumer group caught up", "stream", k[0], "group", k[1])
		}
	}
	return now
}

// close stops the watch and waits for it; safe to call twice.
func (w *interestWatch) close() {
	if w == nil {
		return
	}
	w.once.Do(func() { close(w.stop) })
	w.wg.Wait()
}
