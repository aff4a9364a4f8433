package gcroom

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, scan, headroom uint64
		base, want           int
	}{
		{3 * mib, 3 * mib, 8 * mib, 100, 266},    // 3 MiB + 3 MiB × 2.66 = 11 MiB
		{0, 0, 8 * mib, 100, 200},                // 4 MiB × 2 = 8 MiB
		{3 * mib, 3 * mib, 32 * mib, 100, 875},   // 4 MiB × 8.75 = 35 MiB
		{3 * mib, 3 * mib, 64 * mib, 100, 1000},  // capped: MaxPercent
		{16 * mib, 16 * mib, 32 * mib, 100, 200}, // 16 MiB × 3 = 48 MiB
		{16 * mib, 32 * mib, 32 * mib, 100, 100}, // stacks and globals count: 16 + 32 × 1 = 48 MiB
		{1 << 30, 1 << 30, 64 * mib, 100, 100},   // a large heap keeps its GOGC
		{16 * mib, 16 * mib, 32 * mib, 300, 300}, // never below the base
		{1 * mib, 1 * mib, math.MaxUint64, 100, MaxPercent},
		{1 * mib, 1 * mib, 8 * mib, 2000, 2000}, // a base above the cap stays
	} {
		if got := Percent(c.live, c.scan, c.headroom, c.base); got != c.want {
			t.Errorf("Percent(%d, %d, %d, %d) = %d, want %d", c.live, c.scan, c.headroom, c.base, got, c.want)
		}
	}
}

// gogc reads the GC percent in effect without changing it.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// heap reads the live heap and the heap goal the last collection left.
func heap() (live, goal uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// start starts a Room once the garbage of the tests before is
// collected: the live heap a collection marks counts what was allocated
// while it ran, and a test allocating hundreds of MiB leaves a figure far
// above what is live. The Room stops when the test ends, whatever way.
func start(t *testing.T, headroom uint64) *Room {
	t.Helper()
	runtime.GC()
	runtime.GC()
	r := Start(headroom)
	if r == nil {
		t.Fatal("Start returned nil with GC on (or another Room runs)")
	}
	t.Cleanup(r.Stop)
	return r
}

// TestRoomSetsTheHeapGoal checks the promise itself: with 32 MiB of
// room the heap goal after a collection is the live heap plus 32 MiB
// (within the eighth that tune lets pass), where without it the goal of
// this small heap is the runtime's least, 4 MiB, or twice the live heap.
// The goal is what decides how often the collector runs.
func TestRoomSetsTheHeapGoal(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	live, goal := heap()
	if goal > max(8<<20, 3*live) {
		t.Fatalf("without a room: goal %d for a live heap of %d", goal, live)
	}
	t.Logf("without a room: live %d, goal %d", live, goal)
	r := start(t, 32<<20)
	for i := 0; ; i++ {
		// The finalizer that tunes runs after a collection, on the
		// runtime's own time: bounded polling.
		runtime.GC()
		time.Sleep(2 * time.Millisecond)
		runtime.GC()
		live, goal = heap()
		room := int64(goal) - int64(live)
		if room >= 28<<20 && room <= 37<<20 {
			t.Logf("with 32 MiB of room: live %d, goal %d, percent %d", live, goal, r.Percent())
			return
		}
		if i == 100 {
			t.Fatalf("with 32 MiB of room: live %d, goal %d (room %d MiB), percent %d: want a room of 28 to 37 MiB", live, goal, room>>20, r.Percent())
		}
	}
}

// TestRoomFollowsTheLiveHeap checks that a live heap grown past the
// headroom brings the percent back to the base after a collection.
func TestRoomFollowsTheLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	r := start(t, 8<<20)
	if r.Percent() <= 100 {
		t.Fatalf("small heap: percent %d, want above 100", r.Percent())
	}
	live := make([][]byte, 64) // 64 MiB live: 8 MiB of room is 12 %
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	waitPercent(t, r, 100)
	runtime.KeepAlive(live)
	live = nil
	runtime.KeepAlive(live)
	waitPercent(t, r, -1) // above 100 again once the heap is small
}

// waitPercent runs collections until the Room's percent is want (-1: any
// above 100) and the runtime's agrees; the finalizer that tunes runs
// after a collection, on the runtime's own time, so it polls a bounded
// number of times.
func waitPercent(t *testing.T, r *Room, want int) {
	t.Helper()
	for range 200 {
		runtime.GC()
		p := r.Percent()
		if (want < 0 && p > 100 || p == want) && gogc() == p {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("percent stays %d (runtime %d), want %d", r.Percent(), gogc(), want)
}

func TestStopRestoresAndEnds(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	r := start(t, 64<<20)
	if gogc() <= 150 {
		t.Fatalf("percent %d after Start, want above 150", gogc())
	}
	r.Stop()
	if got := gogc(); got != 150 {
		t.Fatalf("percent %d after Stop, want the 150 from before Start", got)
	}
	for range 5 { // the finalizer chain ends: nothing sets it again
		runtime.GC()
		time.Sleep(2 * time.Millisecond)
	}
	if got := gogc(); got != 150 {
		t.Fatalf("percent %d after collections past Stop, want 150", got)
	}
	if r.tune() {
		t.Fatal("tune after Stop reported true: the finalizer chain would go on")
	}
	r.Stop() // a second Stop is harmless
}

func TestOneRoomAtATime(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	r := start(t, 32<<20)
	if r2 := Start(64 << 20); r2 != nil {
		r2.Stop()
		r.Stop()
		t.Fatal("a second Start while one runs returned a Room")
	}
	r.Stop()
	if got := gogc(); got != 100 {
		t.Fatalf("percent %d after the first Room stopped, want 100", got)
	}
	r = Start(32 << 20) // free again
	if r == nil {
		t.Fatal("Start after Stop returned nil")
	}
	r.Stop()
}

func TestStartDoesNothingWhenOff(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	if r := Start(64 << 20); r != nil {
		r.Stop()
		t.Fatal("Start with GOGC=off returned a Room")
	}
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("percent %d after Start with GC off, want it still off", got)
	}
	debug.SetGCPercent(100)
	if r := Start(0); r != nil {
		t.Fatal("Start(0) returned a Room")
	}
	var r *Room
	r.Stop() // nil is harmless
	if r.Percent() != 0 {
		t.Fatal("nil Room's percent is not 0")
	}
}
