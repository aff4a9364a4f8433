package socket

import "runtime"

// Writes by the sender. A DEALER or ROUTER may stream, so its messages
// go through the peer's queue (HWM accounting, batching), but the
// writer goroutine need not be woken for each: a sender whose push finds
// the writer asleep (the queue was empty and nothing of it is being
// written) takes the writer role itself, if nobody holds it, and writes
// what is queued: its own message and whatever other senders queue
// while it writes, so that under many concurrent senders one write still
// carries many messages. As with writeDirect, it writes only what the
// connection takes without waiting: what is left, and what is queued
// after its last round, go to the writer goroutine, so that Send never
// blocks on the network. Until a take finds the queue empty the queue
// does not count the writer as sleeping, so no other push wakes it: the
// sender that took the role either empties the queue or wakes the
// writer goroutine for the rest.

// ownRounds bounds the batches a sender writes for others before it
// hands the rest to the writer goroutine (a caller's Send must not turn
// into a stream writer under load).
const ownRounds = 4

// push queues m, which counts n bytes (msgBytes), for p, dropping it if
// it does not fit and drop is set (pushDrop), and on peers that allow
// it writes the queue from the sender's goroutine (ownWrite). It
// reports whether p took m.
func (p *peer) push(m Msg, n int64, drop bool) bool {
	if !p.own {
		if drop {
			return p.outq.pushDrop(m, n)
		}
		return p.outq.push(m, n)
	}
	ok, wake := p.outq.pushOwn(m, n, drop)
	if wake {
		p.ownWrite()
	}
	return ok
}

// ownWrite writes what is queued for p from the sender's goroutine, as
// the writer goroutine would, or wakes the writer goroutine if the role
// is taken, Close began, or an earlier write left bytes behind.
func (p *peer) ownWrite() {
	s := p.s
	if s.closed.Load() || !p.wmu.TryLock() {
		signal(p.outq.ready)
		return
	}
	if s.closed.Load() || p.w.Buffered() != 0 || len(p.cw.rest) != 0 {
		p.wmu.Unlock()
		signal(p.outq.ready)
		return
	}
	// As the writer goroutine does: let the goroutines ready to run
	// queue their messages first (callers answered by one batch of
	// replies send their next requests together), so that one write
	// carries them all. With nothing else to run, this returns at once.
	runtime.Gosched()
	if p.ownBatch == nil {
		p.ownBatch = make([]Msg, 0, maxBatch)
	}
	p.cw.nonblock = true
	var err error
	more := false
	for round := 1; ; round++ {
		b, n := p.outq.take(p.ownBatch, p.written)
		p.written = 0
		s.rr.blocked.wakeIfWaiting()
		if len(b) == 0 {
			break // the queue counts the writer as sleeping again
		}
		for _, m := range b {
			if err = p.write(m); err != nil {
				break
			}
		}
		clear(b)
		p.written = n
		if err == nil {
			err = p.w.Flush()
		}
		s.st.ownWrites.Add(1)
		if err != nil {
			break
		}
		// A connection that did not take everything, or a queue
		// written for long enough, goes to the writer goroutine (whose
		// next take gives back p.written).
		if len(p.cw.rest) != 0 {
			s.st.ownRest.Add(1)
			more = true
			break
		}
		if round == ownRounds {
			more = true
			break
		}
	}
	p.cw.nonblock = false
	p.wmu.Unlock()
	switch {
	case err != nil:
		p.shutdown(err)
	case more:
		signal(p.outq.ready)
	}
}
