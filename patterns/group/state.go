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

// stateVersion is the version of a group's state file: 1 holds the
// whole state; 2 adds the generation of the journal that holds the
// changes since (version 1 files are read as generation 0: no journal).
const stateVersion = 2

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

// addRange inserts [from, to), merging with what it overlaps or touches.
func (s *spanSet) addRange(from, to uint64) {
	if from >= to {
		return
	}
	v := *s
	i := sort.Search(len(v), func(i int) bool { return v[i].To >= from })
	j := i
	for j < len(v) && v[j].From <= to {
		from, to = min(from, v[j].From), max(to, v[j].To)
		j++
	}
	if i == j {
		v = append(v, span{})
		copy(v[i+1:], v[i:])
	} else {
		v = append(v[:i+1], v[j:]...)
	}
	v[i] = span{from, to}
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
// (MaxAckPending is each member's own, not a group setting: snapshots
// written before may hold a max_ack_pending, read and ignored.)
type settings struct {
	AckWait    time.Duration   `json:"ack_wait"`
	MaxDeliver int             `json:"max_deliver"`
	Backoff    []time.Duration `json:"backoff,omitempty"`
	Ordered    bool            `json:"ordered,omitempty"`
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

// state is one (stream, group)'s state on the publisher. The server's
// mutex guards it.
type state struct {
	stream, group string
	set           settings
	floor         uint64 // every offset below is acknowledged or dead-lettered
	durable       uint64 // floor as of the last written commit (Floors reports it)
	next          uint64 // the cursor: offsets from here were never leased
	done          spanSet
	pend          map[uint64]*pending // pending records, except those leased in runs
	runs          []*leaseRun         // leases as ranges (see runs.go), ascending
	inRuns        int                 // records leased in runs
	held          map[string]int      // leases per member
	// joined numbers the members in the order of their first fetch here
	// (since the publisher started), and setBy is the member whose
	// settings set holds: see applySettingsLocked.
	joined  map[string]uint64
	joinSeq uint64
	setBy   string
	avail   int                 // pending entries with no member
	keys    map[string][]uint64 // ordered groups: pending offsets per key, ascending
	dirty   bool
	// The journal (see journal.go): the generation of the last
	// snapshot, and what changed since the last commit.
	gen       uint64
	needSnap  bool     // the next commit writes a snapshot
	written   settings // the settings of the last snapshot
	jNext     uint64   // the cursor at the last commit
	jDone     spanSet  // settled since the last commit
	jDeliv    spanSet  // offsets whose delivery count changed since
	cnt       Counters
	parked    []*parkedFetch
	rd        *spool.Reader // at next, kept between fetches
	rdLog     *spool.Log
	rdWritten bool // rd reads up to the written end (spool.Reader.ReadWritten)
	// epoch is the log's epoch the state's offsets belong to (see
	// epoch.go); epochKnown is false for a snapshot written before
	// snapshots held it.
	epoch      uint32
	epochKnown bool
}

func newState(stream, group string, set settings, start uint64) *state {
	return &state{stream: stream, group: group, set: set, floor: start, durable: start, next: start,
		pend: make(map[uint64]*pending), held: make(map[string]int), keys: make(map[string][]uint64),
		joined: make(map[string]uint64)}
}

// settleLeased settles o, leased to a member whose lease count the
// caller lowers (for many records at once).
func (g *state) settleLeased(o uint64, p *pending) {
	if p.key != "" {
		g.unqueue(p.key, o)
	}
	delete(g.pend, o)
}

// settled records [from, to), taken out of the pending records, as
// settled.
func (g *state) settled(from, to uint64) {
	g.done.addRange(from, to)
	g.jDone.addRange(from, to)
	g.advance()
}

// settle marks o acknowledged (or dead-lettered) and advances the floor.
func (g *state) settle(o uint64) {
	if p := g.pend[o]; p != nil {
		g.unpend(o, p)
	}
	g.done.add(o)
	g.jDone.add(o)
	g.advance()
}

// unpend removes o from the pending records.
func (g *state) unpend(o uint64, p *pending) {
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

// advance moves the floor over the settled spans that reach it.
func (g *state) advance() {
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

// delivered notes that o's delivery count changed, for the journal.
func (g *state) delivered(o uint64) {
	g.jDeliv.add(o)
	g.dirty = true
}

// entry returns the changes since the last commit as a journal entry
// and forgets them; ok is false when nothing durable changed.
func (g *state) entry() (e jentry, ok bool) {
	e.next = g.next
	e.done = append([]span(nil), g.jDone...)
	for _, sp := range g.jDeliv {
		for o := sp.From; o < sp.To; o++ {
			p := g.pend[o]
			if p == nil {
				continue // settled since
			}
			if n := len(e.deliv); n > 0 && e.deliv[n-1].To == o && e.deliv[n-1].D == p.deliveries {
				e.deliv[n-1].To++
				continue
			}
			e.deliv = append(e.deliv, dspan{o, o + 1, p.deliveries})
		}
	}
	ok = g.next != g.jNext || len(e.done) > 0 || len(e.deliv) > 0
	g.forget()
	return e, ok
}

// forget drops the changes noted since the last commit (a snapshot
// holds them).
func (g *state) forget() {
	g.jNext = g.next
	g.jDone = g.jDone[:0]
	g.jDeliv = g.jDeliv[:0]
}

// apply replays a journal entry onto a state loaded from its snapshot.
func (g *state) apply(e *jentry, now time.Time) error {
	if e.next < g.next {
		return fmt.Errorf("%w: cursor %d behind %d", ErrJournalDamaged, e.next, g.next)
	}
	// The records read from the cursor on are pending (available, as
	// after any restart), delivered once unless a run says otherwise,
	// unless the entry settles them.
	created := uint64(0)
	o, di := g.next, 0
	for o < e.next {
		for di < len(e.done) && e.done[di].To <= o {
			di++
		}
		end := e.next
		if di < len(e.done) {
			if e.done[di].From <= o {
				o = e.done[di].To
				continue
			}
			end = e.done[di].From
		}
		if created += end - o; created > maxReplayPending {
			return fmt.Errorf("%w: an entry makes more than %d records pending", ErrJournalDamaged, maxReplayPending)
		}
		for ; o < end; o++ {
			g.pend[o] = &pending{deliveries: 1, notBefore: now}
			g.avail++
		}
	}
	g.next = e.next
	for _, sp := range e.done {
		g.settleRange(sp.From, sp.To)
	}
	runs := uint64(0)
	for _, d := range e.deliv {
		if runs += d.To - d.From; runs > maxReplayPending {
			return fmt.Errorf("%w: delivery runs over more than %d records", ErrJournalDamaged, maxReplayPending)
		}
		for o := max(d.From, g.floor); o < d.To; o++ {
			if p := g.pend[o]; p != nil {
				p.deliveries = d.D
			}
		}
	}
	return nil
}

// settleRange settles [from, to) (replay: no leases are held).
func (g *state) settleRange(from, to uint64) {
	from = max(from, g.floor)
	if from >= to {
		return
	}
	if to-from <= uint64(len(g.pend)) {
		for o := from; o < to; o++ {
			if p := g.pend[o]; p != nil {
				g.unpend(o, p)
			}
		}
	} else {
		for o, p := range g.pend {
			if o >= from && o < to {
				g.unpend(o, p)
			}
		}
	}
	g.done.addRange(from, to)
	g.advance()
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

// fileState is a group's state file (the snapshot): the floor, the
// cursor, the settled spans above the floor and the pending records as
// spans of equal delivery counts; from version 2, the generation of the
// journal that holds the changes since. Leases are not kept: after a
// restart every pending record is available at once, with its delivery
// count.
type fileState struct {
	Journal  uint64      `json:"journal,omitempty"`
	Stream   string      `json:"stream"`
	Group    string      `json:"group"`
	Settings settings    `json:"settings"`
	Floor    uint64      `json:"floor"`
	Next     uint64      `json:"next"`
	Done     []span      `json:"done,omitempty"`
	Pending  [][3]uint64 `json:"pending,omitempty"` // from, to, deliveries
	// LogEpoch is the stream's epoch when the snapshot was written: its
	// offsets, and its journal's, are that epoch's records (see epoch.go).
	// Absent in snapshots from before it.
	LogEpoch *uint32 `json:"log_epoch,omitempty"`
}

func (g *state) snapshot() fileState {
	f := fileState{Journal: g.gen, Stream: g.stream, Group: g.group, Settings: g.set, Floor: g.floor, Next: g.next, Done: append([]span(nil), g.done...)}
	if g.epochKnown {
		e := g.epoch
		f.LogEpoch = &e
	}
	type od struct {
		o uint64
		d uint32
	}
	offs := make([]od, 0, len(g.pend)+g.inRuns)
	for o, p := range g.pend {
		offs = append(offs, od{o, p.deliveries})
	}
	for _, r := range g.runs {
		for o := r.from; o < r.to; o++ {
			if !r.acked.has(o) {
				offs = append(offs, od{o, 1})
			}
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i].o < offs[j].o })
	for _, x := range offs {
		o, d := x.o, uint64(x.d)
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

// loadState reads a group's state, its snapshot and then its journal;
// (nil, nil) when there is none. The recovery says what the journal
// held, and whether its last entry was torn (cut off).
func loadState(dir, stream, group string) (*state, recovery, error) {
	var rec recovery
	b, err := os.ReadFile(statePath(dir, stream, group))
	if os.IsNotExist(err) {
		return nil, rec, nil
	}
	if err != nil {
		return nil, rec, err
	}
	var f fileState
	if _, err := fsutil.DecodeVersionedJSON(b, stateVersion, &f); err != nil {
		return nil, rec, fmt.Errorf("group: state of %s/%s: %w", stream, group, err)
	}
	g, err := fromSnapshot(stream, group, &f)
	if err != nil {
		return nil, rec, err
	}
	g.gen, g.written, g.needSnap = f.Journal, g.set, true
	if f.LogEpoch != nil {
		g.epoch, g.epochKnown = *f.LogEpoch, true
	}
	if f.Journal == 0 {
		g.durable = g.floor
		return g, rec, nil // version 1: no journal
	}
	entries, rec, err := readJournal(journalPath(dir, stream, group, f.Journal), f.Journal)
	if err != nil {
		return nil, rec, fmt.Errorf("group: state of %s/%s: %w", stream, group, err)
	}
	now := time.Now()
	for i := range entries {
		if err := g.apply(&entries[i], now); err != nil {
			return nil, rec, fmt.Errorf("group: state of %s/%s: journal entry %d: %w", stream, group, i, err)
		}
	}
	g.forget()
	g.durable = g.floor
	return g, rec, nil
}

// fromSnapshot makes a state from its snapshot.
func fromSnapshot(stream, group string, f *fileState) (*state, error) {
	if f.Next < f.Floor {
		return nil, fmt.Errorf("group: state of %s/%s: cursor %d below floor %d", stream, group, f.Next, f.Floor)
	}
	g := newState(stream, group, f.Settings, f.Floor)
	g.next = f.Next
	for i, sp := range f.Done {
		if sp.From >= sp.To || sp.From < f.Floor || sp.To > f.Next || (i > 0 && sp.From <= f.Done[i-1].To) {
			return nil, fmt.Errorf("group: state of %s/%s: bad settled span %v", stream, group, sp)
		}
	}
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
