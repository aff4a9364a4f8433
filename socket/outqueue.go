package socket

import "sync"

// outQueue is one peer's bounded queue of messages to send. Senders add
// one message at a time; the peer's writer goroutine takes everything
// queued under one lock and encodes it in one batch. It holds at most hwm
// messages. The writer sleeps on ready only after finding the queue empty,
// and only then does a sender pay for waking it.
type outQueue struct {
	mu       sync.Mutex
	ring     msgRing // grows up to hwm
	hwm      int
	sleeping bool          // the writer found the queue empty
	ready    chan struct{} // capacity 1: wakes the writer
	blocked  int           // senders waiting on room (pushWait)
	room     chan struct{} // capacity 1: wakes a blocked sender
}

func newOutQueue(hwm int) *outQueue {
	return &outQueue{hwm: hwm, sleeping: true,
		ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// push adds m unless the queue is full.
func (q *outQueue) push(m Msg) bool {
	q.mu.Lock()
	if q.ring.n >= q.hwm {
		q.mu.Unlock()
		return false
	}
	q.add(m)
	return true
}

// pushWait adds m if there is room. Otherwise it counts the caller as a
// blocked sender and returns false: the caller then waits on q.room and
// calls pushWait again with waited set, or calls giveUp. A blocked sender
// is woken when the writer takes messages; one that gets in passes the
// wake-up on while room is left.
func (q *outQueue) pushWait(m Msg, waited bool) bool {
	q.mu.Lock()
	if waited {
		q.blocked--
	}
	if q.ring.n >= q.hwm {
		q.blocked++
		q.mu.Unlock()
		return false
	}
	if q.blocked > 0 && q.ring.n+1 < q.hwm {
		signal(q.room)
	}
	q.add(m)
	return true
}

// waitRoom reports whether q has room. If not, it counts the caller as a
// blocked sender, who then waits on q.room and calls giveUp.
func (q *outQueue) waitRoom() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ring.n < q.hwm {
		return true
	}
	q.blocked++
	return false
}

// giveUpWoken is giveUp for a sender woken by q.room that will not queue
// here now: the wake-up is passed on while room is left, so that another
// blocked sender does not wait for a take that may never come.
func (q *outQueue) giveUpWoken() {
	q.mu.Lock()
	q.blocked--
	pass := q.blocked > 0 && q.ring.n < q.hwm
	q.mu.Unlock()
	if pass {
		signal(q.room)
	}
}

// giveUp stops counting a sender that waited in pushWait or waitRoom.
func (q *outQueue) giveUp() {
	q.mu.Lock()
	q.blocked--
	q.mu.Unlock()
}

// add appends m and unlocks q, waking the writer if it sleeps.
func (q *outQueue) add(m Msg) {
	q.ring.put(m, q.hwm)
	wake := q.sleeping
	q.sleeping = false
	q.mu.Unlock()
	if wake {
		signal(q.ready)
	}
}

// take moves up to cap(dst) of the oldest messages into dst[:0] and
// returns them. When the queue is empty it returns none and marks the
// writer as sleeping, so that the next push wakes it.
func (q *outQueue) take(dst []Msg) []Msg {
	dst = dst[:0]
	q.mu.Lock()
	k := min(q.ring.n, cap(dst))
	for range k {
		dst = append(dst, q.ring.get())
	}
	if k == 0 {
		q.sleeping = true
	}
	wake := k > 0 && q.blocked > 0
	q.mu.Unlock()
	if wake {
		signal(q.room)
	}
	return dst
}

// len returns the number of queued messages.
func (q *outQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ring.n
}
