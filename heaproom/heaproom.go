// Package heaproom keeps a process's garbage collector from collecting
// too often while its live heap is small: a program moving records at
// full speed with a few MiB live otherwise collects dozens of times a
// second, and each collection costs the same fixed work however small the
// heap.
//
// It changes a setting of the whole process, so it belongs to the
// program, not to a library: call Keep once, in main. The fastmq command
// keeps Default unless GOGC is set.
package heaproom

import "github.com/fastmq/fastmq/internal/gcroom"

// Default is the heap room the fastmq command keeps (see Keep): the best
// of 4 to 64 MiB in its consumer-group benchmark.
const Default = 8 << 20

// Keep makes the garbage collector of this process leave at least room
// bytes of allocation between two collections, whatever the live heap:
// after each collection it raises the GC percent (GOGC) so that the heap
// goal is the live heap plus room, or GOGC's own goal when that is
// larger. With Default the group benchmark acknowledges 25 % more records
// a second. A larger room costs memory and, past a point, speed again
// (the page faults of first touching a larger heap). A memory limit
// (GOMEMLIMIT) still holds.
//
// The percent is capped at 1000: a room is kept in full up to 40 MiB for
// the smallest heaps, and for a live heap of L up to 10 L.
//
// With GC off (GOGC=off), a room of 0, or while an earlier call's room is
// kept, it does nothing. While it runs it owns GOGC: a
// debug.SetGCPercent made meanwhile may be overwritten at a later
// collection, and the returned function, which stops it, puts back the
// GOGC from before the call. It is safe for concurrent use; stop may be
// called once.
func Keep(room uint64) (stop func()) {
	return gcroom.Start(room).Stop
}
