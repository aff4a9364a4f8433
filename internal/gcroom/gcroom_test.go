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
		live, headroom uint64
		base, want     int
	}{
		{3 * mib, 64 * mib, 100, 1675}, // the least goal decides: 4 MiB × 16.75 = 67 MiB
		{0, 64 * mib, 100, 1600},       // 4 MiB × 16 = 64 MiB
		{32 * mib, 64 * mib, 100, 200}, // 32 MiB × 3 = 96 MiB
		{1 << 30, 64 * mib, 100, 100},  // a large heap keeps its GOGC
		{32 * mib, 64 * mib, 300, 300}, // never below the base
		{1 * mib, math.MaxUint64, 100, math.MaxInt32},
	} {
		if got := Percent(c.live, c.headroom, c.base); got != c.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", c.live, c.headroom, c.base, got, c.want)
		}
	}
}

// gogc reads the GC percent in effect without changing it.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

var sink []byte

// collections allocates n bytes of garbage and returns how many
// collections that took.
func collections(n int) uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.NumGC
	for range n / (64 << 10) {
		sink = make([]byte, 64<<10)
	}
	sink = nil
	runtime.ReadMemStats(&ms)
	return ms.NumGC - before
}

// TestRoomCollectsLessOften checks the promise itself: with 64 MiB of
// room a small heap allocating 512 MiB collects a handful of times, and
// without it (GOGC 100, a live heap of a few MiB) dozens.
func TestRoomCollectsLessOften(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	without := collections(512 << 20)

	r := Start(64 << 20)
	if r == nil {
		t.Fatal("Start returned nil with GC on")
	}
	defer r.Stop()
	if got := gogc(); got != r.Percent() || got <= 100 {
		t.Fatalf("after Start the runtime's percent is %d, the Room's %d: want them equal and above 100", got, r.Percent())
	}
	runtime.GC()
	with := collections(512 << 20)
	t.Logf("collections for 512 MiB of garbage: %d without room, %d with 64 MiB", without, with)
	if without < 30 {
		t.Fatalf("without room only %d collections: the test's heap is not small", without)
	}
	// 512 MiB / 64 MiB is 8: far fewer would mean a heap goal far above
	// the promised headroom.
	if with > 12 || with < 5 {
		t.Fatalf("with 64 MiB of room %d collections, want 5 to 12 (512 MiB / 64 MiB, and slack)", with)
	}
}

// TestRoomFollowsTheLiveHeap checks that a live heap grown past the
// headroom brings the percent back to the base after a collection.
func TestRoomFollowsTheLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	r := Start(8 << 20)
	defer r.Stop()
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
	r := Start(64 << 20)
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
