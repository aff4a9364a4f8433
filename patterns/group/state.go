package group

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/fastmq/fastmq/internal/fsutil"
	"github.com/fastmq/fastmq/spool"
)

// stateVersion is the version of a group's state file.
const stateVersion = 1

// span is the offsets [From, To).
type span struct{ From, To uint64 }

// spanSet is a sorted set of disjoint, non-adjacent spans.
type spanSet []span

// add inserts o, merging with its neighbours.
func (s *spanSet) add(o uint64) {
	v := *s
	i := sort.Search(len(v), func(i int) bool { return v[i].To >= o })
	switch {
	case i < len(v) && v[i].From <= o && o < v[i].To:
		return
	case i < len(v) && v[i].To == o:
		v[i].To++
		if i+1 < len(v) && v[i+1].From == v[i].To {
			v[i].To = v[i+1].To
			v = append(v[:i+1], v[i+2:]...)
		}
	case i < len(v) && v[i].From == o+1:
		v[i].From = o
	default:
		v = append(v, span{})
		copy(v[i+1:], v[i:])
		v[i] = span{o, o + 1}
	}
	*s = v
}

// pending is a record of the window [floor, next) that is neither
// acknowledged nor dead-lettered: leased to a member, or available again
// from notBefore.
type pending struct {
	key        string // ordered groups: the record's key ("" for none)
	deliveries uint32
	member     string    // "" when available
	leased     time.Time // when the lease began
	deadline   time.Time
	notBefore  time.Time
}

// settings are a group's semantics, as its members ask for them.
type settings struct {
	AckWait       time.Duration   `json:"ack_wait"`
	MaxDeliver    int             `json:"max_deliver"`
	MaxAckPending int             `json:"max_ack_pending"`
	Backoff       []time.Duration `json:"backoff,omitempty"`
	Ordered       bool            `json:"ordered,omitempty"`
}

// backoff returns the redelivery delay after the n-th delivery failed.
func (s *settings) backoff(n uint32) time.Duration {
	if len(s.Backoff) == 0 {
		return 0
	}
	i := int(n) - 1
	if i >= len(s.Backoff) {
		i = len(s.Backoff) - 1
	}
	if i < 0 {
		i = 0
	}
	return s.Backoff[i]
}

// Counters of one group on one publisher since the server started.
type Counters struct {
	Delivered   uint64 // leases given (first deliveries and redeliveries)
	Redelivered uint64 // leases of records delivered before
	Acked       uint64
	Naked       uint64
	Expired     uint64 // leases that ran out (AckWait)
	Released    uint64 // leases released because their member left or failed
	DeadLetters uint64 // records appended to the dead-letter stream
}

// state is one (stream, group)'s state on the publisher. The server's
// mutex guards it.
type state struct {
	stream, group string
	set           settings
	floor         uint64 // every offset below is acknowledged or dead-lettered
	next          uint64 // the cursor: offsets from here were never leased
	done          spanSet
	pend          map[uint64]*pending
	held          map[string]int      // leases per member
	avail         int                 // pending entries with no member
	keys          map[string][]uint64 // ordered groups: pending offsets per key, ascending
	dirty         bool
	cnt           Counters
	parked        []*parkedFetch
	rd            *spool.Reader // at next, kept between fetches
	rdLog         *spool.Log
}

func newState(stream, group string, set settings, start uint64) *state {
	return &state{stream: stream, group: group, set: set, floor: start, next: start,
		pend: make(map[uint64]*pending), held: make(map[string]int), keys: make(map[string][]uint64)}
}

// settle marks o acknowledged (or dead-lettered) and advances the floor.
func (g *state) settle(o uint64) {
	if p := g.pend[o]; p != nil {
		if p.key != "" {
			g.unqueue(p.key, o)
		}
		if p.member != "" {
			g.release(p.member)
		} else {
			g.avail--
		}
		delete(g.pend, o)
	}
	g.done.add(o)
	for len(g.done) > 0 && g.done[0].From <= g.floor {
		if g.done[0].To > g.floor {
			g.floor = g.done[0].To
		}
		g.done = g.done[1:]
	}
	if g.floor > g.next {
		g.next = g.floor
	}
	g.dirty = true
}

// unqueue removes o from key's queue.
func (g *state) unqueue(key string, o uint64) {
	q := g.keys[key]
	for i, x := range q {
		if x == o {
			q = append(q[:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(g.keys, key)
	} else {
		g.keys[key] = q
	}
}

// blocked reports whether an ordered group's record waits for an earlier
// record of its key.
func (g *state) blocked(o uint64, p *pending) bool {
	return p.key != "" && g.keys[p.key][0] != o
}

func (g *state) release(member string) {
	if g.held[member]--; g.held[member] <= 0 {
		delete(g.held, member)
	}
}

// fileState is a group's state file (version 1): the floor, the cursor,
// the settled spans above the floor and the pending records as spans of
// equal delivery counts. Leases are not kept: after a restart every
// pending record is available at once, with its delivery count.
type fileState struct {
	Stream   string      `json:"stream"`
	Group    string      `json:"group"`
	Settings settings    `json:"settings"`
	Floor    uint64      `json:"floor"`
	Next     uint64      `json:"next"`
	Done     []span      `json:"done,omitempty"`
	Pending  [][3]uint64 `json:"pending,omitempty"` // from, to, deliveries
}

func (g *state) snapshot() fileState {
	f := fileState{Stream: g.stream, Group: g.group, Settings: g.set, Floor: g.floor, Next: g.next, Done: append([]span(nil), g.done...)}
	offs := make([]uint64, 0, len(g.pend))
	for o := range g.pend {
		offs = append(offs, o)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	for _, o := range offs {
		d := uint64(g.pend[o].deliveries)
		if n := len(f.Pending); n > 0 && f.Pending[n-1][1] == o && f.Pending[n-1][2] == d {
			f.Pending[n-1][1]++
			continue
		}
		f.Pending = append(f.Pending, [3]uint64{o, o + 1, d})
	}
	return f
}

// statePath is where a group's state lives under dir.
func statePath(dir, stream, group string) string {
	return filepath.Join(dir, stream, group+".state")
}

func writeState(dir string, f fileState) error {
	p := statePath(dir, f.Stream, f.Group)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return fsutil.WriteVersionedJSON(p, stateVersion, f, 0o644)
}

// loadState reads a group's state; (nil, nil) when there is none.
func loadState(dir, stream, group string) (*state, error) {
	b, err := os.ReadFile(statePath(dir, stream, group))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f fileState
	if _, err := fsutil.DecodeVersionedJSON(b, stateVersion, &f); err != nil {
		return nil, fmt.Errorf("group: state of %s/%s: %w", stream, group, err)
	}
	if f.Next < f.Floor {
		return nil, fmt.Errorf("group: state of %s/%s: cursor %d below floor %d", stream, group, f.Next, f.Floor)
	}
	g := newState(stream, group, f.Settings, f.Floor)
	g.next = f.Next
	g.done = spanSet(f.Done)
	now := time.Now()
	for _, p := range f.Pending {
		if p[1] < p[0] || p[1]-p[0] > 1<<24 || p[0] < f.Floor || p[1] > f.Next {
			return nil, fmt.Errorf("group: state of %s/%s: bad pending span %v", stream, group, p)
		}
		for o := p[0]; o < p[1]; o++ {
			g.pend[o] = &pending{deliveries: uint32(p[2]), notBefore: now}
			g.avail++
		}
	}
	return g, nil
}
