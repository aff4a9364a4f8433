package socket

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// outQueue is one peer's bounded queue of messages to send. Senders add
// one message at a time; the peer's writer goroutine takes what is queued
// (up to a batch's worth) under one lock and encodes it in one batch. It
// holds at most hwm messages and, unless it is empty, at most hwmBytes
// bytes (see msgBytes), counting the batch the writer took until it is
// written (the writer's next take gives its bytes back), so that a writer
// stalled on a peer that does not read holds at most one batch more. The writer sleeps
// on ready only after finding the queue empty, and only then does a
// sender pay for waking it.
type outQueue struct {
	mu       sync.Mutex
	ring     msgRing // grows up to hwm
	hwm      int
	bytes    int64 // queued, and taken but not yet written (msgBytes)
	hwmBytes int64
	gone     bool // release ran: pushes are swallowed
	// total counts the bytes queued for all peers of the socket, when
	// Config.SendHWMBytesTotal bounds them (nil otherwise); pushDrop
	// keeps it under totalMax.
	total    *atomic.Int64
	totalMax int64
	sleeping bool          // the writer found the queue empty
	ready    chan struct{} // capacity 1: wakes the writer
	blocked  waiters       // senders waiting in waitRoom
	// writing says that a sender writes what is queued, or will
	// (Config.SenderWrites: pushBySender); the one whose take finds the
	// queue empty clears it, so the next sender to push writes.
	writing bool
}

func newOutQueue(hwm int, hwmBytes int64, total *atomic.Int64, totalMax int64) *outQueue {
	q := &outQueue{hwm: hwm, hwmBytes: hwmBytes, sleeping: true, ready: make(chan struct{}, 1)}
	if totalMax > 0 {
		q.total, q.totalMax = total, totalMax
	}
	q.blocked.init()
	return q
}

// fitsLocked reports whether a message of n bytes may be queued now: the
// queue is below both marks, or nothing is queued (a message bigger than
// hwmBytes passes alone, and so does one that finds only the batch the
// writer took: the bytes of a written batch come back at the writer's next
// take, and a peer that read the reply to its last request, and asked
// again, must not find its next reply dropped because that writer has not
// run yet). A queue thus holds at most hwmBytes, or one message, besides
// the batch being written.
func (q *outQueue) fitsLocked(n int64) bool {
	if q.ring.n >= q.hwm {
		return false
	}
	return q.ring.n == 0 || q.bytes+n <= q.hwmBytes
}

// push adds m, which counts n bytes (msgBytes), unless the queue is full.
// A queue whose peer went away (release) swallows it.
func (q *outQueue) push(m Msg, n int64) bool {
	q.mu.Lock()
	if q.gone {
		q.mu.Unlock()
		return true
	}
	if !q.fitsLocked(n) {
		q.mu.Unlock()
		return false
	}
	q.add(m, n)
	return true
}

// pushDrop is push for a sender that drops what does not fit: it also
// refuses a message that would take the socket's total past
// Config.SendHWMBytesTotal, unless nothing is queued for this peer (each
// peer still gets one message at a time, as the Config documents).
func (q *outQueue) pushDrop(m Msg, n int64) bool {
	q.mu.Lock()
	if q.gone {
		q.mu.Unlock()
		return true
	}
	if !q.fitsLocked(n) || (q.total != nil && q.ring.n > 0 && q.total.Load()+n > q.totalMax) {
		q.mu.Unlock()
		return false
	}
	q.add(m, n)
	return true
}

// pushBySender is push for a socket whose senders write
// (Config.SenderWrites): it never wakes the writer. write says that no
// one was writing what is queued: the caller must now (see
// peer.writeClaimed); otherwise whoever writes takes m too.
func (q *outQueue) pushBySender(m Msg, n int64) (ok, write bool) {
	q.mu.Lock()
	if q.gone {
		q.mu.Unlock()
		return true, false
	}
	if !q.fitsLocked(n) {
		q.mu.Unlock()
		return false, false
	}
	q.ring.put(m, q.hwm)
	q.bytes += n
	if q.total != nil {
		q.total.Add(n)
	}
	write = !q.writing
	q.writing = true
	q.mu.Unlock()
	return true, write
}

// claim makes the caller the one who writes what is queued (see
// writing), unless someone is already; it reports whether it did. The
// caller must then call peer.writeClaimed.
func (q *outQueue) claim() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.writing || q.gone {
		return false
	}
	q.writing = true
	return true
}

// errPeerGone ends a wait for room in the queue of a peer that went away.
var errPeerGone = errors.New("socket: peer went away")

// waitRoom blocks a sender whose push of a message of n bytes failed
// until the queue has room for it; the sender then pushes again (and may
// find the room taken, as another sender can push first). It ends early
// with errPeerGone when quit closes (the peer went away), with ctx's
// error, or with ErrClosed when closing closes. A woken sender passes the
// wake-up on while room is left: one take signals room once, and the
// sender it woke may not queue here after all (a PubNoDrop send goes on
// to wait for another peer).
func (q *outQueue) waitRoom(ctx context.Context, quit, closing <-chan struct{}, n int64) error {
	return q.blocked.wait(ctx, quit, closing, func() bool { return q.hasRoom(n) })
}

// hasRoom reports whether a push of n bytes would succeed now.
func (q *outQueue) hasRoom(n int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.fitsLocked(n)
}

// add appends m, which counts n bytes, and unlocks q, waking the writer
// if it sleeps.
func (q *outQueue) add(m Msg, n int64) {
	q.ring.put(m, q.hwm)
	q.bytes += n
	if q.total != nil {
		q.total.Add(n)
	}
	// Whoever writes (writing) takes m too: no need to wake the writer.
	wake := q.sleeping && !q.writing
	if wake {
		q.sleeping = false
	}
	q.mu.Unlock()
	if wake {
		signal(q.ready)
	}
}

// take gives back the bytes of the batch the writer wrote since its last
// take, then moves up to cap(dst) of the oldest messages, and no more
// than maxTakeBytes of them unless the first is bigger, into dst[:0] and
// returns them with what they count (to give back at the next take).
// When the queue is empty it returns none and marks the writer as
// sleeping, so that the next push wakes it.
func (q *outQueue) take(dst []Msg, written int64) ([]Msg, int64) {
	dst, n, _ := q.takeSmall(dst, written, false)
	return dst, n
}

// takeSmall is take, but with small set it takes no message bigger than
// maxTakeBytes: it returns none and big instead, leaving the queue as it
// is (writing stays set) for the writer goroutine. A goroutine writing
// without waiting (peer.writeClaimed) copies what the connection does
// not take at once, and must not copy a message of many megabytes.
func (q *outQueue) takeSmall(dst []Msg, written int64, small bool) (_ []Msg, n int64, big bool) {
	dst = dst[:0]
	q.mu.Lock()
	q.bytes -= written
	if small && q.ring.n > 0 && msgBytes(q.ring.at(0)) > maxTakeBytes {
		q.mu.Unlock()
		if q.total != nil && written != 0 {
			q.total.Add(-written)
		}
		if written != 0 {
			q.blocked.wakeIfWaiting()
		}
		return dst, 0, true
	}
	for len(dst) < cap(dst) && q.ring.n > 0 && n < maxTakeBytes {
		if small && n+msgBytes(q.ring.at(0)) > maxTakeBytes {
			break // a big one after small ones: the next take leaves it
		}
		m := q.ring.get()
		n += msgBytes(m)
		dst = append(dst, m)
	}
	if len(dst) == 0 {
		q.sleeping = true
		q.writing = false
	}
	q.mu.Unlock()
	if q.total != nil && written != 0 {
		q.total.Add(-written)
	}
	if len(dst) > 0 || written != 0 {
		q.blocked.wakeIfWaiting()
	}
	return dst, n, false
}

// maxTakeBytes bounds the bytes of one batch the writer takes (a first
// message bigger than that is taken alone).
const maxTakeBytes = 256 << 10

// idle reports whether the queue is empty and the writer holds nothing
// taken from it that it has not written.
func (q *outQueue) idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ring.n == 0 && q.bytes == 0 && !q.gone
}

// len returns the number of queued messages.
func (q *outQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ring.n
}

// release drops what is queued once the peer went away, giving its bytes
// back to the socket's total; later pushes are swallowed.
func (q *outQueue) release() {
	q.mu.Lock()
	q.gone = true
	q.ring.dropNewest(q.ring.n)
	n := q.bytes
	q.bytes = 0
	q.mu.Unlock()
	if q.total != nil && n != 0 {
		q.total.Add(-n)
	}
}

// msgBytes is what m counts in the byte bounds of the queues: the sizes
// of its frames plus FrameOverhead per frame.
func msgBytes(m Msg) int64 {
	n := int64(FrameOverhead * len(m.Frames))
	for _, f := range m.Frames {
		n += int64(len(f))
	}
	return n
}
