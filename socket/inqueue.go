package socket

import "sync"

// inQueue is one peer's bounded queue of received messages. The peer's
// reader goroutine appends whole batches under one lock; Recv takes one
// message at a time (fair queueing across peers). It holds at most hwm
// messages. A reader that finds it full waits on room, which is signalled
// once the queue has drained to half the high-water mark, so that a reader
// and a consumer running at full speed do not wake each other for every
// message.
type inQueue struct {
	mu      sync.Mutex
	ring    msgRing // grows up to hwm
	hwm     int
	waiting bool          // the reader waits for room
	room    chan struct{} // capacity 1
}

func newInQueue(hwm int) *inQueue {
	return &inQueue{hwm: hwm, room: make(chan struct{}, 1)}
}

// push appends as many messages of b as fit and returns how many it took
// and how much room is left. If it could not take them all, the reader
// should wait on q.room before trying again.
func (q *inQueue) push(b []Msg) (taken, room int) {
	q.mu.Lock()
	k := min(len(b), q.hwm-q.ring.n)
	for _, m := range b[:k] {
		q.ring.put(m, q.hwm)
	}
	if k < len(b) {
		q.waiting = true
	}
	room = q.hwm - q.ring.n
	q.mu.Unlock()
	return k, room
}

// pop removes the oldest message.
func (q *inQueue) pop() (Msg, bool) {
	q.mu.Lock()
	if q.ring.n == 0 {
		q.mu.Unlock()
		return Msg{}, false
	}
	m := q.ring.get()
	wake := q.waiting && q.ring.n <= q.hwm/2
	if wake {
		q.waiting = false
	}
	q.mu.Unlock()
	if wake {
		signal(q.room)
	}
	return m, true
}

// dropNewest removes up to n of the newest messages and returns how many
// it removed.
func (q *inQueue) dropNewest(n int) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ring.dropNewest(n)
}

// len returns the number of queued messages.
func (q *inQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ring.n
}
