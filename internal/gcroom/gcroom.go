// Package gcroom gives a Go process with a small heap room to allocate
// between garbage collections.
//
// The runtime starts a collection when the heap has grown by GOGC percent
// (100 by default) over what the last one left live, and never below a
// 4 MiB heap. A FastMQ process keeps little live (a group member holds a
// buffer of leased records, a publisher its group state) while it
// allocates hundreds of megabytes a second (every record a member leases,
// every reply a publisher sends): with a live heap of 3 MiB it collects
// every 3 MiB of allocation, dozens of times a second. Each collection
// has a cost that does not shrink with the heap: stopping the world
// twice, starting the mark workers, scanning every goroutine's stack,
// giving pages back to the system and faulting them in again. On a
// small virtual machine that comes to milliseconds of CPU per collection,
// a third of a group member's CPU at a million records a second.
//
// Start raises the GC percent after every collection so that the next
// one comes after at least a given headroom of allocation: the heap goal
// becomes the live heap plus the headroom, or the runtime's own goal when
// that is larger. A process with a large live heap keeps its GOGC; one
// with a small heap spends at most the headroom in memory to collect far
// less often. The percent is capped (MaxPercent), and one Room runs at a
// time. A memory limit (GOMEMLIMIT, debug.SetMemoryLimit) still
// holds: the runtime collects sooner whenever the limit is near.
//
// It runs no goroutine of its own: the runtime's finalizer goroutine runs
// it once per collection, through a finalizer on an object that each run
// leaves behind for the next collection to find.
package gcroom

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// heapMinimum is the runtime's least heap goal at GOGC 100; it scales
// with the percent (runtime/mgcpacer.go, defaultHeapMinimum).
const heapMinimum = 4 << 20

// MaxPercent caps the percent a Room sets: the percent stays in force
// until the next collection's tune runs (on the finalizer goroutine,
// whenever it is scheduled), and a heap grown meanwhile gets its goal
// from it. At 1000 a room is kept in full up to 40 MiB for the
// smallest heaps (the runtime's least goal scales with the percent),
// and for a live heap of L up to 10 L.
const MaxPercent = 1000

// active is set while a Room runs: GOGC is one setting per process,
// which two Rooms would fight over.
var active atomic.Bool

// Room raises the GC percent of this process after every collection.
type Room struct {
	headroom uint64
	base     int // the percent at Start: never less than this

	mu      sync.Mutex // serialises tune and Stop
	stopped bool
	sample  []metrics.Sample
	percent atomic.Int64 // the percent set last
}

// sentinel carries a finalizer from one collection to the next. It holds
// a pointer, so the runtime gives it an allocation of its own (a tiny
// pointer-free object could share one, and its finalizer never run).
type sentinel struct{ r *Room }

// Start makes the heap goal after each collection at least the live heap
// plus headroom bytes (within MaxPercent). It returns nil, and changes
// nothing, when headroom is 0, garbage collection is off (GOGC=off), or
// another Room runs. While a Room runs, it owns the GC percent: a
// debug.SetGCPercent elsewhere may be overwritten at a later collection,
// and Stop puts back the percent from Start.
func Start(headroom uint64) *Room {
	if headroom == 0 || !active.CompareAndSwap(false, true) {
		return nil
	}
	base := debug.SetGCPercent(100)
	if base < 0 {
		debug.SetGCPercent(base)
		active.Store(false)
		return nil
	}
	r := &Room{headroom: headroom, base: base, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
	r.percent.Store(int64(base))
	debug.SetGCPercent(base)
	r.tune() // for the live heap now, before the first collection
	r.arm()
	return r
}

// arm leaves an object for the next collection to find unreachable; its
// finalizer tunes and arms again.
func (r *Room) arm() {
	runtime.SetFinalizer(&sentinel{r: r}, func(s *sentinel) {
		if s.r.tune() {
			s.r.arm()
		}
	})
}

// tune sets the percent for the live heap the last collection left. It
// reports false once Stop has run.
func (r *Room) tune() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return false
	}
	metrics.Read(r.sample)
	var v [3]uint64
	for i, s := range r.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	p := Percent(v[0], v[0]+v[1]+v[2], r.headroom, r.base)
	old := int(r.percent.Load())
	// Small moves are not worth a change of the runtime's pacing.
	if p != old && (p > old+old/8 || p < old-old/8 || p == r.base) {
		debug.SetGCPercent(p)
		r.percent.Store(int64(p))
	}
	return true
}

// Percent is the GC percent for a live heap of live bytes, of which
// (with the goroutine stacks and globals) scan bytes count towards the
// goal: the one that puts the next collection headroom bytes of
// allocation away, never less than base nor more than MaxPercent (or
// base, if more). The runtime's goal is live + scan × percent / 100, and
// never less than its least goal, 4 MiB × percent / 100: for a small
// heap that bound decides, and the goal is live+headroom either way.
func Percent(live, scan, headroom uint64, base int) int {
	if headroom > math.MaxUint64/200 {
		headroom = math.MaxUint64 / 200
	}
	p := min(headroom*100/max(scan, 1), (live+headroom)*100/heapMinimum, MaxPercent)
	return max(int(p), base)
}

// Percent returns the GC percent the Room set last (0 for a nil Room).
func (r *Room) Percent() int {
	if r == nil {
		return 0
	}
	return int(r.percent.Load())
}

// Stop ends the tuning and puts the percent back to what it was at Start.
func (r *Room) Stop() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.stopped = true
	debug.SetGCPercent(r.base)
	r.percent.Store(int64(r.base))
	active.Store(false)
}
