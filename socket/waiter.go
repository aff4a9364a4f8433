package socket

import (
	"context"
	"sync/atomic"
)

// waiters is where goroutines block until a condition they cannot make
// true themselves may have become true: senders waiting for room in the
// send queues (all of a socket's peers, or one peer's), receivers waiting
// for a message. It holds the protocol all of them follow:
//
//   - a waiter counts itself in n before it tries, so a goroutine that
//     makes the condition true after the try sees n > 0 and wakes it
//     (wakeIfWaiting): no wake-up is lost, and nobody pays for one while
//     no one waits;
//   - a wake-up is one token in a channel of capacity 1, so many wake-ups
//     before anyone takes them cost one;
//   - a waiter whose try then succeeds passes the wake-up on to the next
//     blocked one while others still wait, since one token may stand for
//     room (or messages) enough for several, unless more says nothing is
//     left for them; one whose try fails keeps it, as whoever makes the
//     condition true next wakes the waiters again.
//
// The zero value is not usable: call init first.
type waiters struct {
	n     atomic.Int32  // goroutines in wait
	ch    chan struct{} // capacity 1: wakes one waiter
	woken atomic.Int64  // wake-ups taken by waiters (for tests)
	// more, if set, reports whether the condition may still hold for
	// another waiter after one succeeded: the wake-up is passed on only
	// then. Whoever makes it true again must do so before looking for
	// waiters (wakeIfWaiting), so one of the two sees the other.
	more func() bool
}

func (w *waiters) init() { w.ch = make(chan struct{}, 1) }

// wake wakes one waiter, or the next one to wait.
func (w *waiters) wake() { signal(w.ch) }

// wakeIfWaiting wakes one waiter if any waits. Call it after making the
// condition true (after the lock that guards it is released, or within).
func (w *waiters) wakeIfWaiting() {
	if w.n.Load() > 0 {
		signal(w.ch)
	}
}

// waiting returns the number of goroutines in wait.
func (w *waiters) waiting() int { return int(w.n.Load()) }

// wait calls try until it reports success, blocking between tries until
// woken. It ends early with errPeerGone when quit closes, with ctx's
// error (see ctxErr) when ctx ends, or with ErrClosed when closing
// closes; a nil quit or closing never does.
func (w *waiters) wait(ctx context.Context, quit, closing <-chan struct{}, try func() bool) error {
	for {
		w.n.Add(1)
		ok := try()
		if !ok {
			select {
			case <-w.ch:
				w.woken.Add(1)
			case <-quit:
				w.n.Add(-1)
				return errPeerGone
			case <-ctx.Done():
				w.n.Add(-1)
				return ctxErr(ctx)
			case <-closing:
				w.n.Add(-1)
				return ErrClosed
			}
		}
		if w.n.Add(-1) > 0 && ok && (w.more == nil || w.more()) {
			w.wake()
		}
		if ok {
			return nil
		}
	}
}
