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

var sink []byte

// collections allocates n bytes of garbage and returns how many
// collections that took.
func collections(n int) uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.NumGC
	for range n / (64 << 10) {
		sink = make([]byte, 64<<10)
		// On one CPU the finalizer goroutine that tunes must get to
		// run between collections, as it does beside a real workload.
		runtime.Gosched()
	}
	sink = nil
	runtime.ReadMemStats(&ms)
	return ms.NumGC - before
}

// TestRoomCollectsLessOften checks the promise itself: with 32 MiB of
// room a small heap allocating 512 MiB collects about 16 times, and
// without it (GOGC 100, a live heap of a few MiB) a hundred or more.
func TestRoomCollectsLessOften(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	without := collections(512 << 20)

	r := Start(32 << 20)
	if r == nil {
		t.Fatal("Start returned nil with GC on")
	}
	defer r.Stop()
	if got := gogc(); got != r.Percent() || got <= 100 {
		t.Fatalf("after Start the runtime's percent is %d, the Room's %d: want them equal and above 100", got, r.Percent())
	}
	runtime.GC()
	with := collections(512 << 20)
	t.Logf("collections for 512 MiB of garbage: %d without room, %d with 32 MiB", without, with)
	if without < 30 {
		t.Fatalf("without room only %d collections: the test's heap is not small", without)
	}
	// 512 MiB / 32 MiB is 16: far fewer would mean a heap goal far
	// above the promised headroom.
	if with > 24 || with < 10 {
		t.Fatalf("with 32 MiB of room %d collections, want 10 to 24 (512 MiB / 32 MiB, and slack)", with)
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

func TestOneRoomAtATime(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	r := Start(32 << 20)
	if r == nil {
		t.Fatal("first Start returned nil")
	}
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
