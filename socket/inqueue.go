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
	ring    []Msg // circular; grows up to hwm
	head, n int
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
	k := min(len(b), q.hwm-q.n)
	if need := q.n + k; need > len(q.ring) {
		q.grow(need)
	}
	c := len(q.ring)
	for _, m := range b[:k] {
		i := q.head + q.n
		if i >= c {
			i -= c
		}
		q.ring[i] = m
		q.n++
	}
	if k < len(b) {
		q.waiting = true
	}
	room = q.hwm - q.n
	q.mu.Unlock()
	return k, room
}

// grow makes room for at least need messages, keeping their order.
func (q *inQueue) grow(need int) {
	c := max(2*len(q.ring), 64, need)
	c = min(c, max(q.hwm, need))
	r := make([]Msg, c)
	for i := range q.n {
		j := q.head + i
		if j >= len(q.ring) {
			j -= len(q.ring)
		}
		r[i] = q.ring[j]
	}
	q.ring, q.head = r, 0
}

// pop removes the oldest message.
func (q *inQueue) pop() (Msg, bool) {
	q.mu.Lock()
	if q.n == 0 {
		q.mu.Unlock()
		return Msg{}, false
	}
	m := q.ring[q.head]
	q.ring[q.head] = Msg{}
	q.head++
	if q.head == len(q.ring) {
		q.head = 0
	}
	q.n--
	wake := q.waiting && q.n <= q.hwm/2
	if wake {
		q.waiting = false
	}
	q.mu.Unlock()
	if wake {
		select {
		case q.room <- struct{}{}:
		default:
		}
	}
	return m, true
}

// dropNewest removes up to n of the newest messages and returns how many
// it removed.
func (q *inQueue) dropNewest(n int) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n = min(n, q.n)
	for i := q.n - n; i < q.n; i++ {
		j := q.head + i
		if j >= len(q.ring) {
			j -= len(q.ring)
		}
		q.ring[j] = Msg{}
	}
	q.n -= n
	return n
}

// len returns the number of queued messages.
func (q *inQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}
