package durable

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/fastmq/fastmq/internal/fsutil"
)

// FileVersion is the version of a group's state file: 1 holds the
// whole state; 2 adds the generation of the journal that holds the
// changes since (version 1 files are read as generation 0: no journal).
//
// 3 adds the dead letters replayed to the group (see Reopen).
const FileVersion = 3

// Span is the offsets [From, To).
type Span struct{ From, To uint64 }

// SpanSet is a sorted set of disjoint, non-adjacent spans.
type SpanSet []Span

// Add inserts o, merging with its neighbours.
func (s *SpanSet) Add(o uint64) {
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
		v = append(v, Span{})
		copy(v[i+1:], v[i:])
		v[i] = Span{o, o + 1}
	}
	*s = v
}

// AddRange inserts [from, to), merging with what it overlaps or touches.
func (s *SpanSet) AddRange(from, to uint64) {
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
		v = append(v, Span{})
		copy(v[i+1:], v[i:])
	} else {
		v = append(v[:i+1], v[j:]...)
	}
	v[i] = Span{from, to}
	*s = v
}

// Pending is a record of the window [floor, next) that is neither
// acknowledged nor dead-lettered: leased to a member, or available again
// from notBefore.
type Pending struct {
	Key        string // ordered groups: the record's key ("" for none)
	Deliveries uint32
	Member     string    // "" when available
	Leased     time.Time // when the lease began
	Deadline   time.Time
	NotBefore  time.Time
	// History is the record's last failed deliveries (at most
	// MaxHistory), kept in memory only, for its dead letter.
	History []Attempt
}

// MaxHistory is the most failed deliveries a Pending keeps.
const MaxHistory = 8

// Attempt is one failed delivery of a record: by whom, when, how it
// ended (nak, expired, term, member gone) and the member's reason.
type Attempt struct {
	Delivery uint32    `json:"delivery"`
	Member   string    `json:"member,omitempty"`
	Leased   time.Time `json:"leased"`
	Ended    time.Time `json:"ended"`
	Outcome  string    `json:"outcome"`
	Reason   string    `json:"reason,omitempty"`
}

// Note records a failed delivery of p (its current lease) ending at now.
func (p *Pending) Note(outcome, reason string, now time.Time) {
	if len(p.History) == MaxHistory {
		copy(p.History, p.History[1:])
		p.History = p.History[:MaxHistory-1]
	}
	p.History = append(p.History, Attempt{Delivery: p.Deliveries, Member: p.Member, Leased: p.Leased, Ended: now, Outcome: outcome, Reason: reason})
}

// Settings are a group's semantics, as its members ask for them.
// (MaxAckPending is each member's own, not a group setting: snapshots
// written before may hold a max_ack_pending, read and ignored.)
type Settings struct {
	AckWait    time.Duration   `json:"ack_wait"`
	MaxDeliver int             `json:"max_deliver"`
	Backoff    []time.Duration `json:"backoff,omitempty"`
	Ordered    bool            `json:"ordered,omitempty"`
}

// Delay returns the redelivery delay after the n-th delivery failed.
func (s *Settings) Delay(n uint32) time.Duration {
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
type State struct {
	Stream, Group string
	Set           Settings
	Floor         uint64 // every offset below is acknowledged or dead-lettered
	Durable       uint64 // floor as of the last written commit (Floors reports it)
	Next          uint64 // the cursor: offsets from here were never leased
	Done          SpanSet
	Pend          map[uint64]*Pending // pending records, except those leased in runs
	Runs          []*LeaseRun         // leases as ranges (see runs.go), ascending
	InRuns        int                 // records leased in runs
	Held          map[string]int      // leases per member
	Avail         int                 // pending entries with no member
	Keys          map[string][]uint64 // ordered groups: pending offsets per key, ascending
	Dirty         bool
	// The journal (see journal.go): the generation of the last
	// snapshot, and what changed since the last commit.
	Gen      uint64
	NeedSnap bool     // the next commit writes a snapshot
	Written  Settings // the settings of the last snapshot
	jNext    uint64   // the cursor at the last commit
	jDone    SpanSet  // settled since the last commit
	jDeliv   SpanSet  // offsets whose delivery count changed since
	// Epoch is the log's Epoch the state's offsets belong to (see
	// Epoch.go); epochKnown is false for a snapshot written before
	// snapshots held it.
	Epoch      uint32
	EpochKnown bool
	// Replayed are the offsets of the dead-letter stream replayed to the
	// group (Reopen); only snapshots write them.
	Replayed SpanSet
}

func New(stream, group string, set Settings, start uint64) *State {
	return &State{Stream: stream, Group: group, Set: set, Floor: start, Durable: start, Next: start,
		Pend: make(map[uint64]*Pending), Held: make(map[string]int), Keys: make(map[string][]uint64)}
}

// SettleLeased settles o, leased to a member whose lease count the
// caller lowers (for many records at once).
func (g *State) SettleLeased(o uint64, p *Pending) {
	if p.Key != "" {
		g.Unqueue(p.Key, o)
	}
	delete(g.Pend, o)
}

// Settled records [from, to), taken out of the pending records, as
// Settled.
func (g *State) Settled(from, to uint64) {
	g.Done.AddRange(from, to)
	g.jDone.AddRange(from, to)
	g.advance()
}

// Settle marks o acknowledged (or dead-lettered) and advances the floor.
func (g *State) Settle(o uint64) {
	if p := g.Pend[o]; p != nil {
		g.Unpend(o, p)
	}
	g.Done.Add(o)
	g.jDone.Add(o)
	g.advance()
}

// Unpend removes o from the pending records.
func (g *State) Unpend(o uint64, p *Pending) {
	if p.Key != "" {
		g.Unqueue(p.Key, o)
	}
	if p.Member != "" {
		g.Release(p.Member)
	} else {
		g.Avail--
	}
	delete(g.Pend, o)
}

// advance moves the floor over the settled spans that reach it.
func (g *State) advance() {
	for len(g.Done) > 0 && g.Done[0].From <= g.Floor {
		if g.Done[0].To > g.Floor {
			g.Floor = g.Done[0].To
		}
		g.Done = g.Done[1:]
	}
	if g.Floor > g.Next {
		g.Next = g.Floor
	}
	g.Dirty = true
}

// Delivered notes that o's delivery count changed, for the journal.
func (g *State) Delivered(o uint64) {
	g.jDeliv.Add(o)
	g.Dirty = true
}

// Changes returns the changes since the last commit as a journal Changes
// and forgets them; ok is false when nothing durable changed.
func (g *State) Changes() (e Entry, ok bool) {
	e.Next = g.Next
	e.Done = append([]Span(nil), g.jDone...)
	for _, sp := range g.jDeliv {
		for o := sp.From; o < sp.To; o++ {
			p := g.Pend[o]
			if p == nil {
				continue // settled since
			}
			if n := len(e.Deliv); n > 0 && e.Deliv[n-1].To == o && e.Deliv[n-1].D == p.Deliveries {
				e.Deliv[n-1].To++
				continue
			}
			e.Deliv = append(e.Deliv, DSpan{o, o + 1, p.Deliveries})
		}
	}
	ok = g.Next != g.jNext || len(e.Done) > 0 || len(e.Deliv) > 0
	g.Forget()
	return e, ok
}

// Forget drops the changes noted since the last commit (a snapshot
// holds them).
func (g *State) Forget() {
	g.jNext = g.Next
	g.jDone = g.jDone[:0]
	g.jDeliv = g.jDeliv[:0]
}

// Apply replays a journal entry onto a state loaded from its snapshot.
func (g *State) Apply(e *Entry, now time.Time) error {
	if e.Next < g.Next {
		return fmt.Errorf("%w: cursor %d behind %d", ErrJournalDamaged, e.Next, g.Next)
	}
	// The records read from the cursor on are pending (available, as
	// after any restart), delivered once unless a run says otherwise,
	// unless the entry settles them.
	created := uint64(0)
	o, di := g.Next, 0
	for o < e.Next {
		for di < len(e.Done) && e.Done[di].To <= o {
			di++
		}
		end := e.Next
		if di < len(e.Done) {
			if e.Done[di].From <= o {
				o = e.Done[di].To
				continue
			}
			end = e.Done[di].From
		}
		if created += end - o; created > maxReplayPending {
			return fmt.Errorf("%w: an entry makes more than %d records pending", ErrJournalDamaged, maxReplayPending)
		}
		for ; o < end; o++ {
			g.Pend[o] = &Pending{Deliveries: 1, NotBefore: now}
			g.Avail++
		}
	}
	g.Next = e.Next
	for _, sp := range e.Done {
		g.SettleRange(sp.From, sp.To)
	}
	runs := uint64(0)
	for _, d := range e.Deliv {
		if runs += d.To - d.From; runs > maxReplayPending {
			return fmt.Errorf("%w: delivery runs over more than %d records", ErrJournalDamaged, maxReplayPending)
		}
		for o := max(d.From, g.Floor); o < d.To; o++ {
			if p := g.Pend[o]; p != nil {
				p.Deliveries = d.D
			}
		}
	}
	return nil
}

// SettleRange settles [from, to) (replay: no leases are held).
func (g *State) SettleRange(from, to uint64) {
	from = max(from, g.Floor)
	if from >= to {
		return
	}
	if to-from <= uint64(len(g.Pend)) {
		for o := from; o < to; o++ {
			if p := g.Pend[o]; p != nil {
				g.Unpend(o, p)
			}
		}
	} else {
		for o, p := range g.Pend {
			if o >= from && o < to {
				g.Unpend(o, p)
			}
		}
	}
	g.Done.AddRange(from, to)
	g.advance()
}

// Unqueue removes o from key's queue.
func (g *State) Unqueue(key string, o uint64) {
	q := g.Keys[key]
	for i, x := range q {
		if x == o {
			q = append(q[:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(g.Keys, key)
	} else {
		g.Keys[key] = q
	}
}

// Blocked reports whether an ordered group's record waits for an earlier
// record of its key.
func (g *State) Blocked(o uint64, p *Pending) bool {
	return p.Key != "" && g.Keys[p.Key][0] != o
}

func (g *State) Release(member string) {
	if g.Held[member]--; g.Held[member] <= 0 {
		delete(g.Held, member)
	}
}

// File is a group's state file (the snapshot): the floor, the
// cursor, the settled spans above the floor and the pending records as
// spans of equal delivery counts; from version 2, the generation of the
// journal that holds the changes since. Leases are not kept: after a
// restart every pending record is available at once, with its delivery
// count.
type File struct {
	Journal  uint64      `json:"journal,omitempty"`
	Stream   string      `json:"stream"`
	Group    string      `json:"group"`
	Settings Settings    `json:"settings"`
	Floor    uint64      `json:"floor"`
	Next     uint64      `json:"next"`
	Done     []Span      `json:"done,omitempty"`
	Pending  [][3]uint64 `json:"pending,omitempty"` // from, to, deliveries
	// LogEpoch is the stream's epoch when the snapshot was written: its
	// offsets, and its journal's, are that epoch's records (see epoch.go).
	// Absent in snapshots from before it.
	LogEpoch *uint32 `json:"log_epoch,omitempty"`
	// Replayed are the offsets of the group's dead-letter stream replayed
	// to it (version 3): written with the reopened records, so that a
	// replay is applied once.
	Replayed []Span `json:"replayed,omitempty"`
}

func (g *State) Snapshot() File {
	f := File{Journal: g.Gen, Stream: g.Stream, Group: g.Group, Settings: g.Set, Floor: g.Floor, Next: g.Next, Done: append([]Span(nil), g.Done...),
		Replayed: append([]Span(nil), g.Replayed...)}
	if g.EpochKnown {
		e := g.Epoch
		f.LogEpoch = &e
	}
	type od struct {
		o uint64
		d uint32
	}
	offs := make([]od, 0, len(g.Pend)+g.InRuns)
	for o, p := range g.Pend {
		offs = append(offs, od{o, p.Deliveries})
	}
	for _, r := range g.Runs {
		for o := r.From; o < r.To; o++ {
			if !r.Acked.Has(o) {
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

// Path is where a group's state lives under dir.
func Path(dir, stream, group string) string {
	return filepath.Join(dir, stream, group+".state")
}

func Write(dir string, f File) error {
	p := Path(dir, f.Stream, f.Group)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return fsutil.WriteVersionedJSON(p, FileVersion, f, 0o644)
}

// Load reads a group's state, its snapshot and then its journal;
// (nil, nil) when there is none. The recovery says what the journal
// held, and whether its last entry was torn (cut off).
func Load(dir, stream, group string) (*State, Recovery, error) {
	var rec Recovery
	b, err := os.ReadFile(Path(dir, stream, group))
	if os.IsNotExist(err) {
		return nil, rec, nil
	}
	if err != nil {
		return nil, rec, err
	}
	var f File
	if _, err := fsutil.DecodeVersionedJSON(b, FileVersion, &f); err != nil {
		return nil, rec, fmt.Errorf("group: state of %s/%s: %w", stream, group, err)
	}
	g, err := FromSnapshot(stream, group, &f)
	if err != nil {
		return nil, rec, err
	}
	g.Gen, g.Written, g.NeedSnap = f.Journal, g.Set, true
	if f.LogEpoch != nil {
		g.Epoch, g.EpochKnown = *f.LogEpoch, true
	}
	if f.Journal == 0 {
		g.Durable = g.Floor
		return g, rec, nil // version 1: no journal
	}
	entries, rec, err := ReadJournal(JournalPath(dir, stream, group, f.Journal), f.Journal)
	if err != nil {
		return nil, rec, fmt.Errorf("group: state of %s/%s: %w", stream, group, err)
	}
	now := time.Now()
	for i := range entries {
		if err := g.Apply(&entries[i], now); err != nil {
			return nil, rec, fmt.Errorf("group: state of %s/%s: journal entry %d: %w", stream, group, i, err)
		}
	}
	g.Forget()
	g.Durable = g.Floor
	return g, rec, nil
}

// FromSnapshot makes a state from its snapshot.
func FromSnapshot(stream, group string, f *File) (*State, error) {
	if f.Next < f.Floor {
		return nil, fmt.Errorf("group: state of %s/%s: cursor %d below floor %d", stream, group, f.Next, f.Floor)
	}
	g := New(stream, group, f.Settings, f.Floor)
	g.Next = f.Next
	for i, sp := range f.Done {
		if sp.From >= sp.To || sp.From < f.Floor || sp.To > f.Next || (i > 0 && sp.From <= f.Done[i-1].To) {
			return nil, fmt.Errorf("group: state of %s/%s: bad settled span %v", stream, group, sp)
		}
	}
	g.Done = SpanSet(f.Done)
	g.Replayed = SpanSet(f.Replayed)
	now := time.Now()
	for _, p := range f.Pending {
		if p[1] < p[0] || p[1]-p[0] > 1<<24 || p[0] < f.Floor || p[1] > f.Next {
			return nil, fmt.Errorf("group: state of %s/%s: bad pending span %v", stream, group, p)
		}
		for o := p[0]; o < p[1]; o++ {
			g.Pend[o] = &Pending{Deliveries: uint32(p[2]), NotBefore: now}
			g.Avail++
		}
	}
	return g, nil
}

// Equal reports whether a and b are the same settings.
func (a *Settings) Equal(b *Settings) bool {
	return a.AckWait == b.AckWait && a.MaxDeliver == b.MaxDeliver && a.Ordered == b.Ordered && slices.Equal(a.Backoff, b.Backoff)
}

// Has reports whether o is in the set.
func (v SpanSet) Has(o uint64) bool {
	i := sort.Search(len(v), func(i int) bool { return v[i].To > o })
	return i < len(v) && v[i].From <= o
}
