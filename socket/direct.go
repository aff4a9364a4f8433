package socket

import (
	"net"
	"runtime"
)

// Direct writes. A REQ or REP sender always waits for the answer to what
// it sends, so it never streams: its message is best written by the
// sender itself, at once, rather than queued for the peer's writer
// goroutine, which would have to be woken for it (a hand-off between
// goroutines on each side of every round trip). writeDirect does so when
// the writer is idle and nothing is queued or buffered ahead of the
// message, and only with a write that never waits: what the connection
// does not take at once is left to the writer goroutine, so that Send
// never blocks on the network (its semantics are those of a queued send).
// Kinds that may stream (PUSH, DEALER, ROUTER, PUB...) always queue, so
// that the writer batches their messages into few writes.

// directMax bounds the messages written directly: bigger ones are queued.
const directMax = 16 << 10

// connWriter is what a peer's zmtp.Writer writes to. Whoever holds the
// peer's wmu owns it.
type connWriter struct {
	conn net.Conn
	// try writes what the connection takes now without waiting and says
	// how much that was; nil where the connection offers no such write.
	try func(b []byte) (int, error)
	// nonblock is set during a direct write: Write then writes with try
	// and keeps in rest what did not go.
	nonblock bool
	rest     []byte
}

func newConnWriter(c net.Conn) *connWriter {
	w := &connWriter{conn: c}
	if mc, ok := c.(*memConn); ok {
		w.try = mc.tryWrite
	} else {
		w.try = rawTryWrite(c)
	}
	return w
}

// Write writes b. In nonblock mode it writes what the connection takes at
// once and keeps the rest for flushRest; otherwise it writes what an
// earlier direct write left first, then b, waiting as long as it takes.
func (w *connWriter) Write(b []byte) (int, error) {
	if w.nonblock {
		if len(w.rest) > 0 {
			// What an earlier write left goes first: keep b behind it.
			w.rest = append(w.rest, b...)
			return len(b), nil
		}
		n, err := w.try(b)
		if err != nil {
			return n, err
		}
		if n < len(b) {
			w.rest = append(w.rest[:0], b[n:]...)
		}
		return len(b), nil
	}
	if err := w.flushRest(); err != nil {
		return 0, err
	}
	return w.conn.Write(b)
}

// flushRest writes what a direct write left, waiting as long as it takes.
func (w *connWriter) flushRest() error {
	if len(w.rest) == 0 {
		return nil
	}
	_, err := w.conn.Write(w.rest)
	w.rest = w.rest[:0]
	if cap(w.rest) > restKeep {
		w.rest = nil // a rest of a batch: not kept for the peer's life
	}
	return err
}

// restKeep bounds the buffer a connWriter keeps for rests between them.
const restKeep = 32 << 10

// writeDirect writes m, which counts n bytes (msgBytes), to the
// connection from the sender's goroutine if the peer allows direct
// writes, m is small, the writer is idle and nothing is queued or
// buffered ahead of m. It reports whether it took m; if not, the caller
// queues it. A connection that fails takes m with it, as it would a
// queued message.
func (p *peer) writeDirect(m Msg, n int64) bool {
	if !p.direct || n > directMax || !p.wmu.TryLock() {
		return false
	}
	// Once Close began, the writer's linger owns the connection.
	if p.s.closed.Load() || !p.outq.idle() || p.w.Buffered() != 0 || len(p.cw.rest) != 0 {
		p.wmu.Unlock()
		return false
	}
	p.cw.nonblock = true
	err := p.w.WriteMessage(m.Frames)
	if err == nil {
		err = p.w.Flush()
	}
	p.cw.nonblock = false
	left := len(p.cw.rest) != 0
	p.wmu.Unlock()
	p.s.st.direct.Add(1)
	if err != nil {
		p.shutdown(err)
		return true
	}
	if left {
		p.s.st.directRest.Add(1)
		signal(p.outq.ready) // the writer writes the rest
	}
	return true
}

// writeClaimed writes what is queued for p from the goroutine that
// claimed the writing (outQueue.writing): a sender whose push found no
// one writing (Config.SenderWrites: outQueue.pushBySender), or a
// ROUTER's reader goroutine after waking receivers (writesReplies). With
// yield it first yields, so that the goroutines ready to run queue their
// messages too (a batch of replies wakes several callers at once); the
// reader has yielded already. It takes and writes batches until the
// queue is empty, as the writer goroutine would, but with writes that
// never wait: what the connection does not take at once (copied, so it
// takes no message bigger than maxTakeBytes), more than maxWriteRounds
// batches, or a write held by another goroutine is left to the writer
// goroutine, woken for it. The queue keeps saying that someone writes
// until a take finds it empty, so a message queued meanwhile is never
// left behind.
func (p *peer) writeClaimed(yield bool) {
	if yield {
		runtime.Gosched()
	}
	if !p.wmu.TryLock() {
		signal(p.outq.ready)
		return
	}
	// Once Close began, the writer's linger owns the connection.
	if p.s.closed.Load() || p.w.Buffered() != 0 || len(p.cw.rest) != 0 {
		p.wmu.Unlock()
		signal(p.outq.ready)
		return
	}
	if p.sbatch == nil {
		p.sbatch = make([]Msg, 0, maxBatch)
	}
	p.cw.nonblock = true
	var err error
	empty := false
	for round := range maxWriteRounds {
		b, n, big := p.outq.takeSmall(p.sbatch, p.written, true)
		p.written = 0
		p.s.rr.blocked.wakeIfWaiting()
		if big {
			break // the writer goroutine writes it, and what follows
		}
		if len(b) == 0 {
			empty = true
			break
		}
		if round == 0 {
			p.s.st.claimedWrites.Add(1)
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
		if err != nil || len(p.cw.rest) != 0 {
			break
		}
	}
	p.cw.nonblock = false
	p.wmu.Unlock()
	if err != nil {
		p.shutdown(err)
		return
	}
	if len(p.cw.rest) != 0 {
		p.s.st.directRest.Add(1)
	}
	if !empty {
		signal(p.outq.ready) // the writer goes on from here
	}
}
