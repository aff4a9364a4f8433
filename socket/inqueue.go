package socket

import (
	"sync"
	"sync/atomic"
)

// inQueue is one peer's bounded queue of received messages. The peer's
// reader goroutine appends whole batches under one lock; Recv takes one
// message at a time (fair queueing across peers). It holds at most hwm
// messages and, unless it holds a single message, at most hwmBytes bytes
// (msgBytes). A reader that finds it full waits on room, which is
// signalled once the queue has drained to half of both marks, so that a
// reader and a consumer running at full speed do not wake each other for
// every message.
type inQueue struct {
	mu       sync.Mutex
	ring     msgRing // grows up to hwm
	hwm      int
	bytes    int64
	hwmBytes int64
	waiting  bool          // the reader waits for room
	room     chan struct{} // capacity 1
	// n is ring.n, written under mu: pop finds an empty queue (as the
	// receivers waiting on a socket do most of the time) without taking
	// the lock. A receiver counts itself as waiting before it pops and a
	// reader looks for waiters after it pushes (waiters), so with n read
	// and written atomically one of them sees the other.
	n atomic.Int32
	// total counts the messages of all the socket's receive queues
	// (fairQueue.queued), changed as n is.
	total *atomic.Int64
}

func newInQueue(hwm int, hwmBytes int64, total *atomic.Int64) *inQueue {
	return &inQueue{hwm: hwm, hwmBytes: hwmBytes, room: make(chan struct{}, 1), total: total}
}

// push appends as many messages of b as fit, given their sizes in sizes,
// as arrived at at (see clock), and returns how many it took and how much
// room is left, in messages and bytes. If it could not take them all, the
// reader should wait on q.room before trying again.
func (q *inQueue) push(b []Msg, sizes []int64, at int64) (taken, room int, roomBytes int64) {
	q.mu.Lock()
	k := 0
	for ; k < len(b) && q.ring.n < q.hwm; k++ {
		if q.ring.n > 0 && q.bytes+sizes[k] > q.hwmBytes {
			break
		}
		q.ring.putAt(b[k], at, q.hwm)
		q.bytes += sizes[k]
	}
	if k < len(b) {
		q.waiting = true
	}
	room, roomBytes = q.hwm-q.ring.n, q.hwmBytes-q.bytes
	q.n.Store(int32(q.ring.n))
	q.total.Add(int64(k))
	q.mu.Unlock()
	return k, room, roomBytes
}

// pop removes the oldest message and returns it with when it arrived.
func (q *inQueue) pop() (Msg, int64, bool) {
	if q.n.Load() == 0 {
		return Msg{}, 0, false
	}
	q.mu.Lock()
	if q.ring.n == 0 {
		q.mu.Unlock()
		return Msg{}, 0, false
	}
	at := q.ring.oldestAt()
	m := q.ring.get()
	q.n.Store(int32(q.ring.n))
	q.total.Add(-1)
	q.bytes -= msgBytes(m)
	wake := q.waiting && q.ring.n <= q.hwm/2 && q.bytes <= q.hwmBytes/2
	if wake {
		q.waiting = false
	}
	q.mu.Unlock()
	if wake {
		signal(q.room)
	}
	return m, at, true
}

// dropNewest removes up to n of the newest messages and returns how many
// it removed.
func (q *inQueue) dropNewest(n int) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n = min(n, q.ring.n)
	for i := q.ring.n - n; i < q.ring.n; i++ {
		q.bytes -= msgBytes(q.ring.at(i))
	}
	n = q.ring.dropNewest(n)
	q.n.Store(int32(q.ring.n))
	q.total.Add(-int64(n))
	return n
}

// dropBytes removes the newest messages until the queue counts at most
// limit bytes or holds one message, and returns how many it removed.
func (q *inQueue) dropBytes(limit int64) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := 0
	for q.ring.n > 1 && q.bytes > limit {
		q.bytes -= msgBytes(q.ring.at(q.ring.n - 1))
		q.ring.dropNewest(1)
		k++
	}
	q.n.Store(int32(q.ring.n))
	q.total.Add(-int64(k))
	return k
}

// size returns the bytes the queued messages count.
func (q *inQueue) size() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes
}

// len returns the number of queued messages.
func (q *inQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ring.n
}
