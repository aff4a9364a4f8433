package socket

import (
	"context"
	"errors"
	"sync"
)

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
	blocked  waiters       // senders waiting in waitRoom
}

func newOutQueue(hwm int) *outQueue {
	q := &outQueue{hwm: hwm, sleeping: true, ready: make(chan struct{}, 1)}
	q.blocked.init()
	return q
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

// errPeerGone ends a wait for room in the queue of a peer that went away.
var errPeerGone = errors.New("socket: peer went away")

// waitRoom blocks a sender whose push failed until the queue has room;
// the sender then pushes again (and may find the room taken, as another
// sender can push first). It ends early with errPeerGone when quit closes
// (the peer went away), with ctx's error, or with ErrClosed when closing
// closes. A woken sender passes the wake-up on while room is left: one
// take signals room once, and the sender it woke may not queue here after
// all (a PubNoDrop send goes on to wait for another peer).
func (q *outQueue) waitRoom(ctx context.Context, quit, closing <-chan struct{}) error {
	return q.blocked.wait(ctx, quit, closing, q.hasRoom)
}

// hasRoom reports whether a push would succeed now.
func (q *outQueue) hasRoom() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ring.n < q.hwm
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
	q.mu.Unlock()
	if k > 0 {
		q.blocked.wakeIfWaiting()
	}
	return dst
}

// len returns the number of queued messages.
func (q *outQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ring.n
}
