package durable

import (
	"slices"
	"testing"
	"time"
)

func TestSpanSetRemove(t *testing.T) {
	s := SpanSet{{0, 5}, {7, 8}}
	for _, o := range []uint64{2, 0, 4, 7, 9} {
		s.Remove(o)
	}
	if want := (SpanSet{{1, 2}, {3, 4}}); !slices.Equal(s, want) {
		t.Fatalf("%v, want %v", s, want)
	}
}

// Reopen makes a settled record pending again, below the floor too (the
// floor moves back, the records between stay settled), and refuses one
// that is pending or was never leased; a snapshot keeps the replayed
// offsets.
func TestReopen(t *testing.T) {
	g := New("s", "g", Settings{AckWait: time.Second}, 0)
	g.Next = 10
	g.Settled(0, 8) // floor 8
	g.Done.AddRange(9, 10)
	now := time.Now()
	if !g.Reopen(3, "", now) || g.Floor != 3 || !g.Done.Has(4) || g.Done.Has(3) || g.Pend[3] == nil || g.Avail != 1 {
		t.Fatalf("reopen below the floor: floor %d done %v pend %v", g.Floor, g.Done, g.Pend)
	}
	if !g.Reopen(9, "k", now) || g.Done.Has(9) || g.Pend[9] == nil || !slices.Equal(g.Keys["k"], []uint64{9}) {
		t.Fatalf("reopen above the floor: done %v keys %v", g.Done, g.Keys)
	}
	if g.Reopen(3, "", now) || g.Reopen(10, "", now) {
		t.Fatal("reopened a pending record, or one never leased")
	}
	g.Replayed.Add(0)
	f := g.Snapshot()
	h, err := FromSnapshot("s", "g", &f)
	if err != nil || h.Floor != 3 || len(h.Pend) != 2 || !h.Replayed.Has(0) {
		t.Fatalf("from the snapshot: %+v %v", h, err)
	}
}
