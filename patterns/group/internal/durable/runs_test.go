package durable

import (
	"reflect"
	"testing"
	"time"
)

// A run partly acked is written in a snapshot as its records still
// leased, delivered once, beside the other pending records; broken, it
// becomes exactly those pending entries, and the snapshot is the same.
func TestRunSnapshotAndBreak(t *testing.T) {
	g := New("s", "g", Settings{AckWait: time.Minute}, 10)
	g.Next = 26
	now := time.Now()
	g.Runs = []*LeaseRun{{From: 10, To: 20, Member: "a/x.1", Leased: now, Deadline: now.Add(time.Minute), Left: 10}}
	g.InRuns = 10
	g.Held["a/x.1"] = 10
	g.Pend[25] = &Pending{Deliveries: 3}
	g.Avail = 1
	for _, r := range [][2]uint64{{12, 14}, {15, 16}} {
		if n, ok := g.AckInRun(0, r[0], r[1], "a/x.1", 1); !ok || n != int(r[1]-r[0]) {
			t.Fatalf("ack %v: %d, %v", r, n, ok)
		}
		g.Settled(r[0], r[1])
	}
	if _, ok := g.AckInRun(0, 13, 15, "a/x.1", 1); ok {
		t.Fatal("an ack of 13 (acked) and 14 taken at once")
	}
	if _, ok := g.AckInRun(0, 16, 17, "b/y.1", 1); ok {
		t.Fatal("another member's ack taken")
	}
	if _, ok := g.AckInRun(0, 16, 17, "a/x.1", 2); ok {
		t.Fatal("an ack with delivery count 2 taken")
	}
	want := [][3]uint64{{10, 12, 1}, {14, 15, 1}, {16, 20, 1}, {25, 26, 3}}
	if got := g.Snapshot().Pending; !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot with the run: %v, want %v", got, want)
	}
	if g.InRuns != 7 {
		t.Fatalf("%d records in runs, want 7", g.InRuns)
	}
	g.BreakRunAt(17)
	if len(g.Runs) != 0 || g.InRuns != 0 || len(g.Pend) != 8 {
		t.Fatalf("after the break: %d runs, %d in runs, %d pending", len(g.Runs), g.InRuns, len(g.Pend))
	}
	for _, o := range []uint64{10, 11, 14, 16, 17, 18, 19} {
		if p := g.Pend[o]; p == nil || p.Member != "a/x.1" || p.Deliveries != 1 {
			t.Fatalf("pending %d after the break: %+v", o, p)
		}
	}
	if got := g.Snapshot().Pending; !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot after the break: %v, want %v", got, want)
	}
	g.BreakRunAt(17) // no run there now: nothing
	if len(g.Pend) != 8 {
		t.Fatalf("a second break changed the pending records: %d", len(g.Pend))
	}
}
func TestSpanSet(t *testing.T) {
	var s SpanSet
	for _, o := range []uint64{5, 7, 6, 1, 2, 10, 0, 9, 8} {
		s.Add(o)
	}
	want := SpanSet{{0, 3}, {5, 11}}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got %v, want %v", s, want)
	}
}
