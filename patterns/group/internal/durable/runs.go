package durable

import (
	"slices"
	"sort"
	"time"
)

// Leases as ranges. The common lease is a run of consecutive records a
// fetch read from the cursor and leased together to one member: first
// deliveries, with no key to queue and no not-before time. Such a run is
// one leaseRun, not one pending entry per record; acks of its records by
// its member (OpAckRanges) settle them as ranges. Anything else that
// touches a record of a run (a plain ack, nak, progress or term, the
// lease's expiry, its member gone, an ack with another delivery count)
// first breaks the run into pending entries, one per record still
// leased, and goes the per-record way from there. Runs are never written:
// a snapshot lists their records as pending, delivered once, and the
// journal's default for records read from the cursor is one delivery.

// LeaseRun is the records [from, to) leased together to member, except
// those in acked.
type LeaseRun struct {
	From, To uint64
	Member   string
	Leased   time.Time
	Deadline time.Time
	Acked    SpanSet // settled since (within [from, to))
	Left     int     // records still leased
}

// RunAt returns the index of the run of g.runs whose range holds o (its
// record may be acked already), or -1.
func (g *State) RunAt(o uint64) int {
	i := sort.Search(len(g.Runs), func(i int) bool { return g.Runs[i].To > o })
	if i < len(g.Runs) && g.Runs[i].From <= o {
		return i
	}
	return -1
}

// BreakRun turns run i into pending entries, one per record still leased.
func (g *State) BreakRun(i int) {
	r := g.Runs[i]
	slab := make([]Pending, r.Left)
	k := 0
	a := 0
	for o := r.From; o < r.To; o++ {
		for a < len(r.Acked) && r.Acked[a].To <= o {
			a++
		}
		if a < len(r.Acked) && r.Acked[a].From <= o {
			o = r.Acked[a].To - 1
			continue
		}
		p := &slab[k]
		k++
		p.Deliveries, p.Member, p.Leased, p.Deadline = 1, r.Member, r.Leased, r.Deadline
		g.Pend[o] = p
	}
	g.InRuns -= r.Left
	g.Runs = slices.Delete(g.Runs, i, i+1) // clears the freed slot: no stale run kept
}

// BreakRunAt breaks the run holding o, if any.
func (g *State) BreakRunAt(o uint64) {
	if i := g.RunAt(o); i >= 0 {
		g.BreakRun(i)
	}
}

// BreakRunsWhere breaks every run whose member gone says is gone.
func (g *State) BreakRunsWhere(gone func(member string) bool) {
	for i := 0; i < len(g.Runs); {
		if gone(g.Runs[i].Member) {
			g.BreakRun(i)
			continue
		}
		i++
	}
}

// BreakExpiredRuns breaks the runs whose lease ran out by now, and
// returns the earliest deadline of the others (ok false when none).
func (g *State) BreakExpiredRuns(now time.Time) (next time.Time, ok bool) {
	for i := 0; i < len(g.Runs); {
		r := g.Runs[i]
		if !r.Deadline.After(now) {
			g.BreakRun(i)
			continue
		}
		if !ok || r.Deadline.Before(next) {
			next, ok = r.Deadline, true
		}
		i++
	}
	return next, ok
}

// AckInRun acks [from, to), all within run i, for member with delivery
// count d: it returns how many it acked, or ok false when the run is
// another member's, d is not 1, or some record of the range was settled
// already (the caller then goes record by record).
func (g *State) AckInRun(i int, from, to uint64, member string, d uint32) (n int, ok bool) {
	r := g.Runs[i]
	if r.Member != member || d != 1 || r.Acked.Overlaps(from, to) {
		return 0, false
	}
	r.Acked.AddRange(from, to)
	n = int(to - from)
	r.Left -= n
	g.InRuns -= n
	if r.Left == 0 {
		g.Runs = slices.Delete(g.Runs, i, i+1) // clears the freed slot: no stale run kept
	}
	return n, true
}

// Overlaps reports whether any offset of [from, to) is in the set.
func (s SpanSet) Overlaps(from, to uint64) bool {
	i := sort.Search(len(s), func(i int) bool { return s[i].To > from })
	return i < len(s) && s[i].From < to
}
