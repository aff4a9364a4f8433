package group

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

// leaseRun is the records [from, to) leased together to member, except
// those in acked.
type leaseRun struct {
	from, to uint64
	member   string
	leased   time.Time
	deadline time.Time
	acked    spanSet // settled since (within [from, to))
	left     int     // records still leased
}

// runAt returns the index of the run of g.runs whose range holds o (its
// record may be acked already), or -1.
func (g *state) runAt(o uint64) int {
	i := sort.Search(len(g.runs), func(i int) bool { return g.runs[i].to > o })
	if i < len(g.runs) && g.runs[i].from <= o {
		return i
	}
	return -1
}

// breakRun turns run i into pending entries, one per record still leased.
func (g *state) breakRun(i int) {
	r := g.runs[i]
	slab := make([]pending, r.left)
	k := 0
	a := 0
	for o := r.from; o < r.to; o++ {
		for a < len(r.acked) && r.acked[a].To <= o {
			a++
		}
		if a < len(r.acked) && r.acked[a].From <= o {
			o = r.acked[a].To - 1
			continue
		}
		p := &slab[k]
		k++
		p.deliveries, p.member, p.leased, p.deadline = 1, r.member, r.leased, r.deadline
		g.pend[o] = p
	}
	g.inRuns -= r.left
	g.runs = slices.Delete(g.runs, i, i+1) // clears the freed slot: no stale run kept
}

// breakRunAt breaks the run holding o, if any.
func (g *state) breakRunAt(o uint64) {
	if i := g.runAt(o); i >= 0 {
		g.breakRun(i)
	}
}

// breakRunsWhere breaks every run whose member gone says is gone.
func (g *state) breakRunsWhere(gone func(member string) bool) {
	for i := 0; i < len(g.runs); {
		if gone(g.runs[i].member) {
			g.breakRun(i)
			continue
		}
		i++
	}
}

// breakExpiredRuns breaks the runs whose lease ran out by now, and
// returns the earliest deadline of the others (ok false when none).
func (g *state) breakExpiredRuns(now time.Time) (next time.Time, ok bool) {
	for i := 0; i < len(g.runs); {
		r := g.runs[i]
		if !r.deadline.After(now) {
			g.breakRun(i)
			continue
		}
		if !ok || r.deadline.Before(next) {
			next, ok = r.deadline, true
		}
		i++
	}
	return next, ok
}

// ackInRun acks [from, to), all within run i, for member with delivery
// count d: it returns how many it acked, or ok false when the run is
// another member's, d is not 1, or some record of the range was settled
// already (the caller then goes record by record).
func (g *state) ackInRun(i int, from, to uint64, member string, d uint32) (n int, ok bool) {
	r := g.runs[i]
	if r.member != member || d != 1 || r.acked.overlaps(from, to) {
		return 0, false
	}
	r.acked.addRange(from, to)
	n = int(to - from)
	r.left -= n
	g.inRuns -= n
	if r.left == 0 {
		g.runs = slices.Delete(g.runs, i, i+1) // clears the freed slot: no stale run kept
	}
	return n, true
}

// overlaps reports whether any offset of [from, to) is in the set.
func (s spanSet) overlaps(from, to uint64) bool {
	i := sort.Search(len(s), func(i int) bool { return s[i].To > from })
	return i < len(s) && s[i].From < to
}
