package durable

import (
	"sort"
	"time"
)

// Remove takes o out of the set, splitting its span.
func (s *SpanSet) Remove(o uint64) {
	v := *s
	i := sort.Search(len(v), func(i int) bool { return v[i].To > o })
	if i == len(v) || v[i].From > o {
		return
	}
	sp := v[i]
	switch {
	case sp.From == o && sp.To == o+1:
		v = append(v[:i], v[i+1:]...)
	case sp.From == o:
		v[i].From++
	case sp.To == o+1:
		v[i].To--
	default:
		v = append(v, Span{})
		copy(v[i+1:], v[i:])
		v[i] = Span{sp.From, o}
		v[i+1] = Span{o + 1, sp.To}
	}
	*s = v
}

// Reopen makes the settled record o (acknowledged or dead-lettered, below
// the cursor) pending again, available from now with no delivery counted:
// a dead letter replayed to its group. The floor moves back to o if it was
// above it (the records between stay settled). It reports false, changing
// nothing, for a record not settled (pending, or never leased). The
// change moves the state back: the caller writes it as a snapshot
// (NeedSnap).
func (g *State) Reopen(o uint64, key string, now time.Time) bool {
	if o >= g.Next || g.Pend[o] != nil || g.RunAt(o) >= 0 {
		return false
	}
	switch {
	case o < g.Floor:
		g.Done.AddRange(o+1, g.Floor)
		g.Floor = o
	case g.Done.Has(o):
		g.Done.Remove(o)
	default:
		return false
	}
	g.Pend[o] = &Pending{Key: key, NotBefore: now}
	g.Avail++
	if key != "" {
		q := g.Keys[key]
		i := sort.Search(len(q), func(i int) bool { return q[i] >= o })
		q = append(q, 0)
		copy(q[i+1:], q[i:])
		q[i] = o
		g.Keys[key] = q
	}
	g.Dirty, g.NeedSnap = true, true
	return true
}
