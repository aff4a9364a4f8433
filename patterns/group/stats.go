package group

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fastmq/fastmq/spool"
)

// Counters of one group on one publisher since the server started.
type Counters struct {
	Delivered   uint64 `json:"delivered"`   // leases given (first deliveries and redeliveries)
	Redelivered uint64 `json:"redelivered"` // leases of records delivered before
	Acked       uint64 `json:"acked"`
	Naked       uint64 `json:"naked"`
	Expired     uint64 `json:"expired"`      // leases that ran out (AckWait)
	Released    uint64 `json:"released"`     // leases released because their member left or failed
	DeadLetters uint64 `json:"dead_letters"` // records appended to the dead-letter stream
}

// GroupStats describe one group on this publisher. Counters count since
// the server started; the rest is the group's state now. It is the one
// shape of a group's stats: the group protocol's info, list and seek
// answers carry it as JSON, and so do a node's /status (fastmq.Status)
// and the CLI's --json output, with the JSON names of its tags.
type GroupStats struct {
	Counters
	Stream string `json:"stream"`
	Group  string `json:"group"`
	Floor  uint64 `json:"floor"`  // every record below is acknowledged or dead-lettered
	Next   uint64 `json:"cursor"` // the cursor: the first record never leased
	// High is the end of what may be leased: the stream's written end, or
	// its durable end under LeaseAfterSync (High-Next: records never
	// delivered).
	High      uint64 `json:"high"`
	Pending   int    `json:"pending"`   // records in flight or waiting for redelivery
	Available int    `json:"waiting"`   // of those, records waiting for redelivery
	InFlight  int    `json:"in_flight"` // of those, records leased to a member
	Members   int    `json:"members"`   // members holding leases
	// Active is the members holding leases or waiting in a fetch here:
	// the group's live members as this publisher sees them (an idle
	// member waits in a fetch, holding nothing). ActiveNodes names their
	// nodes (a member id's part before "/"), sorted, each once.
	Active      int      `json:"active_members"`
	ActiveNodes []string `json:"active_nodes,omitempty"`
	// Lag is the records not settled (acknowledged or dead-lettered):
	// those never delivered (High-Next) and the pending ones.
	Lag uint64 `json:"lag_records"`
	// LagTime is the age of the oldest record not settled (the one at
	// Floor); 0 when none is.
	LagTime time.Duration `json:"lag_time_ns"`
	// DeadLettered is the records in the group's dead-letter stream on
	// this publisher (DLQStream), over its whole life: unlike the
	// DeadLetters counter it survives restarts.
	DeadLettered uint64 `json:"dead_lettered"`
	// The group's settings, as its members last asked for them.
	AckWait    time.Duration `json:"ack_wait_ns"`
	MaxDeliver int           `json:"max_deliver"`
	Ordered    bool          `json:"ordered,omitempty"`
}

// Stats returns the state and counters of every group this server
// knows, by "stream/group". A group is known once a member fetched from
// it, or once an ack, info or seek named it, since the server started.
func (s *Server) Stats() map[string]GroupStats {
	type item struct {
		st GroupStats
		l  *spool.Log
	}
	s.mu.Lock()
	items := make([]item, 0, len(s.groups))
	for _, g := range s.groups {
		l, _ := s.cfg.Lookup(g.Stream)
		items = append(items, item{g.stats(l, s.end), l})
	}
	s.mu.Unlock()
	// The reads for the lag times happen outside the lock: a fetch or an
	// ack never waits for a status.
	out := make(map[string]GroupStats, len(items))
	for _, it := range items {
		s.completeStats(&it.st, it.l)
		out[it.st.Stream+"/"+it.st.Group] = it.st
	}
	return out
}

// List returns Stats as a slice sorted by stream and group.
func (s *Server) List() []GroupStats {
	m := s.Stats()
	out := make([]GroupStats, 0, len(m))
	for _, st := range m {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Stream != out[j].Stream {
			return out[i].Stream < out[j].Stream
		}
		return out[i].Group < out[j].Group
	})
	return out
}

// active counts the members holding leases or with a fetch parked, and
// names their nodes; s.mu held.
func (g *state) active() (int, []string) {
	ids := make(map[string]bool, len(g.Held)+len(g.parked))
	for id, n := range g.Held {
		if n > 0 {
			ids[id] = true
		}
	}
	for _, p := range g.parked {
		ids[p.req.Member] = true
	}
	var nodes []string
	for id := range ids {
		node, _, _ := strings.Cut(id, "/")
		if !slices.Contains(nodes, node) {
			nodes = append(nodes, node)
		}
	}
	sort.Strings(nodes)
	return len(ids), nodes
}

// stats is g's state, with end the end of what may be leased from l;
// s.mu held. completeStats adds what needs reads.
func (g *state) stats(l *spool.Log, end func(*spool.Log) uint64) GroupStats {
	st := GroupStats{Counters: g.cnt, Stream: g.Stream, Group: g.Group, Floor: g.Floor, Next: g.Next,
		Pending: len(g.Pend) + g.InRuns, Available: g.Avail, InFlight: len(g.Pend) + g.InRuns - g.Avail, Members: len(g.Held),
		AckWait: g.Set.AckWait, MaxDeliver: g.Set.MaxDeliver, Ordered: g.Set.Ordered}
	st.Active, st.ActiveNodes = g.active()
	if l != nil {
		st.High = end(l)
		if st.High > g.Next {
			st.Lag = st.High - g.Next
		}
		st.Lag += uint64(len(g.Pend) + g.InRuns)
	}
	return st
}

// completeStats fills the parts of st that read a spool: the lag time
// and the dead letters. s.mu is not held.
func (s *Server) completeStats(st *GroupStats, l *spool.Log) {
	if dl, ok := s.cfg.Lookup(DLQStream(st.Stream, st.Group)); ok {
		st.DeadLettered = dl.NextOffset()
	}
	if l == nil || st.Lag == 0 {
		return
	}
	o := max(st.Floor, l.OldestOffset())
	if o >= st.High {
		return
	}
	if t, ok := s.recTimes.time(st.Stream, st.Group, l, o); ok {
		st.LagTime = max(time.Since(t), 0)
	}
}

// recordTimes caches, per group, the time of the record at its floor: a
// status every second reads a record only when a floor moved.
type recordTimes struct {
	mu sync.Mutex
	m  map[string]recordTime
}

type recordTime struct {
	l   *spool.Log
	off uint64
	t   time.Time
}

// time returns the time of the record at offset o of l, the floor of
// stream's group.
func (c *recordTimes) time(stream, group string, l *spool.Log, o uint64) (time.Time, bool) {
	k := stream + "\x00" + group
	c.mu.Lock()
	rt, ok := c.m[k]
	c.mu.Unlock()
	if ok && rt.l == l && rt.off == o {
		return rt.t, true
	}
	r, err := readOne(l, o)
	if err != nil || r.Time.IsZero() {
		return time.Time{}, false
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[string]recordTime)
	}
	if len(c.m) > 2*MaxGroups {
		clear(c.m) // groups gone; bounded
	}
	c.m[k] = recordTime{l, o, r.Time}
	c.mu.Unlock()
	return r.Time, true
}

// Counters returns the counters of one group on this server, without
// the reads Stats does for the lag time: cheap enough to poll.
func (s *Server) Counters(stream, group string) (Counters, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[stream+"\x00"+group]
	if g == nil {
		return Counters{}, false
	}
	return g.cnt, true
}
