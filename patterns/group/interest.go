package group

import (
	"log/slog"
	"sort"
	"sync"
	"time"
)

// InterestConfig configures interest retention and the report of groups
// far behind, for a publisher that serves groups (fastmq.Config.Interest).
// The zero value keeps retention by age and size alone and reports groups
// more than the default distances behind.
type InterestConfig struct {
	// Retain turns on interest retention for every stream of the node:
	// a stream keeps its records until every consumer group this node
	// knows for it (those it serves and those it keeps state for) has
	// acknowledged them, and deletes them, whole segments at a time, at
	// the next retention pass (spool.Config.RetentionInterval, and after
	// each segment roll) once all have (see Server.RetentionFloor).
	// spool.Config.RetentionAge and RetentionBytes cap it: past them
	// records go even if a group has not acknowledged them, which is
	// logged and reported (see Behind.Capped). A stream no group reads is
	// kept by age and size alone. Plain consumers keep their own
	// positions, unknown to the publisher: with Retain, records they have
	// not read yet may go once every group has them.
	Retain bool
	// BehindRecords and BehindBytes: a group more than this many records
	// (default 1,000,000) or bytes (default 1 GiB) behind the head of a
	// stream is far behind. Negative turns that measure off.
	BehindRecords int64
	BehindBytes   int64
	// CheckInterval is how often a BehindWatch looks for groups far
	// behind, to log once when a group crosses the threshold and once when
	// it is back (default 10 s). Status and the metrics look when asked.
	CheckInterval time.Duration
}

// Behind describes a consumer group far behind on one of a publisher's
// streams.
type Behind struct {
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

// RetentionFloor returns the least floor of the groups this server knows
// on stream (see Floors), and false when it knows none: what interest
// retention keeps (a stream's spool.Config.RetentionFloor).
func (s *Server) RetentionFloor(stream string) (uint64, bool) {
	floors := s.Floors(stream)
	if len(floors) == 0 {
		return 0, false
	}
	least := ^uint64(0)
	for _, f := range floors {
		least = min(least, f)
	}
	return least, true
}

// Behind returns the groups far behind (see InterestConfig), or whose
// records retention's cap removed, on the streams named, sorted by stream
// and group. A stream the server cannot look up is skipped.
func (s *Server) Behind(streams []string, cfg InterestConfig) []Behind {
	cfg = cfg.normalize()
	var out []Behind
	for _, name := range streams {
		l, ok := s.cfg.Lookup(name)
		if !ok {
			continue
		}
		next, oldest := l.NextOffset(), l.OldestOffset()
		for g, floor := range s.Floors(name) {
			b := Behind{Stream: name, Group: g, Floor: floor, Capped: floor < oldest}
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

// BehindWatch logs consumer groups as they cross the far-behind threshold:
// a warning once when a group becomes far behind, an info line once when
// it is back. It is safe for concurrent use; Close is idempotent.
type BehindWatch struct {
	look func() []Behind
	log  *slog.Logger
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	mu  sync.Mutex // guards was; held across a Check's logging
	was map[[2]string]bool
}

// NewBehindWatch starts a watch that calls look (Server.Behind, say) every
// interval (default 10 s) and logs the changes to lg (nil: discarded),
// until Close.
func NewBehindWatch(look func() []Behind, interval time.Duration, lg *slog.Logger) *BehindWatch {
	if interval <= 0 {
		interval = InterestConfig{}.normalize().CheckInterval
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	w := &BehindWatch{look: look, log: lg, stop: make(chan struct{}), was: map[[2]string]bool{}}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
			w.Check()
		}
	}()
	return w
}

// Check looks now, as the watch does every interval, and logs the groups
// that became far behind since the last look, and those back.
func (w *BehindWatch) Check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := map[[2]string]bool{}
	for _, b := range w.look() {
		k := [2]string{b.Stream, b.Group}
		now[k] = true
		if !w.was[k] {
			w.log.Warn("consumer group far behind", "stream", b.Stream, "group", b.Group, "offset", b.Floor,
				"records", b.Records, "bytes", b.Bytes, "capped", b.Capped)
		}
	}
	for k := range w.was {
		if !now[k] {
			w.log.Info("consumer group caught up", "stream", k[0], "group", k[1])
		}
	}
	w.was = now
}

// Close stops the watch and waits for its goroutine.
func (w *BehindWatch) Close() {
	w.once.Do(func() { close(w.stop) })
	w.wg.Wait()
}
