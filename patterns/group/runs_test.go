package group

import (
	"reflect"
	"testing"
	"time"
)

// A run partly acked is written in a snapshot as its records still
// leased, delivered once, beside the other pending records; broken, it
// becomes exactly those pending entries, and the snapshot is the same.
func TestRunSnapshotAndBreak(t *testing.T) {
	g := newState("s", "g", settings{AckWait: time.Minute}, 10)
	g.next = 26
	now := time.Now()
	g.runs = []*leaseRun{{from: 10, to: 20, member: "a/x.1", leased: now, deadline: now.Add(time.Minute), left: 10}}
	g.inRuns = 10
	g.held["a/x.1"] = 10
	g.pend[25] = &pending{deliveries: 3}
	g.avail = 1
	for _, r := range [][2]uint64{{12, 14}, {15, 16}} {
		if n, ok := g.ackInRun(0, r[0], r[1], "a/x.1", 1); !ok || n != int(r[1]-r[0]) {
			t.Fatalf("ack %v: %d, %v", r, n, ok)
		}
		g.settled(r[0], r[1])
	}
	if _, ok := g.ackInRun(0, 13, 15, "a/x.1", 1); ok {
		t.Fatal("an ack of 13 (acked) and 14 taken at once")
	}
	if _, ok := g.ackInRun(0, 16, 17, "b/y.1", 1); ok {
		t.Fatal("another member's ack taken")
	}
	if _, ok := g.ackInRun(0, 16, 17, "a/x.1", 2); ok {
		t.Fatal("an ack with delivery count 2 taken")
	}
	want := [][3]uint64{{10, 12, 1}, {14, 15, 1}, {16, 20, 1}, {25, 26, 3}}
	if got := g.snapshot().Pending; !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot with the run: %v, want %v", got, want)
	}
	if g.inRuns != 7 {
		t.Fatalf("%d records in runs, want 7", g.inRuns)
	}
	g.breakRunAt(17)
	if len(g.runs) != 0 || g.inRuns != 0 || len(g.pend) != 8 {
		t.Fatalf("after the break: %d runs, %d in runs, %d pending", len(g.runs), g.inRuns, len(g.pend))
	}
	for _, o := range []uint64{10, 11, 14, 16, 17, 18, 19} {
		if p := g.pend[o]; p == nil || p.member != "a/x.1" || p.deliveries != 1 {
			t.Fatalf("pending %d after the break: %+v", o, p)
		}
	}
	if got := g.snapshot().Pending; !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot after the break: %v, want %v", got, want)
	}
	g.breakRunAt(17) // no run there now: nothing
	if len(g.pend) != 8 {
		t.Fatalf("a second break changed the pending records: %d", len(g.pend))
	}
}
func TestSpanSet(t *testing.T) {
	var s spanSet
	for _, o := range []uint64{5, 7, 6, 1, 2, 10, 0, 9, 8} {
		s.add(o)
	}
	want := spanSet{{0, 3}, {5, 11}}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got %v, want %v", s, want)
	}
}
