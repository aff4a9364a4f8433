package socket

import (
	"runtime"
	"time"

	"github.com/fastmq/fastmq/internal/zmtp"
)

func (p *peer) writeLoop() {
	s := p.s
	var tick <-chan time.Time
	if s.cfg.HeartbeatInterval > 0 && p.minor >= 1 { // ZMTP 3.0 has no PING
		t := time.NewTicker(s.cfg.HeartbeatInterval)
		defer t.Stop()
		tick = t.C
	}
	var pingBuf []byte
	batch := make([]Msg, 0, maxBatch)
	for {
		var err error
		select {
		case <-p.outq.ready:
			// Let the goroutines that are ready to run queue their
			// messages before we take ours: a sender that woke us is
			// often one of several (callers answered by one batch of
			// replies, say), and one write for all of them costs far
			// less than a write each. With nothing else to run, this
			// returns at once.
			runtime.Gosched()
			p.wmu.Lock()
			// What a direct write left goes first; then subscription
			// changes made before these messages, as they would go down
			// libzmq's single pipe.
			err = p.cw.flushRest()
			if err == nil {
				select {
				case <-p.subctl.note:
					err = p.writeSubs()
				default:
				}
			}
			if err == nil {
				err = p.writeQueued(batch, maxWriteRounds)
			}
			if err == nil {
				err = p.w.Flush()
			}
			p.wmu.Unlock()
		case <-p.subctl.note:
			p.wmu.Lock()
			if err = p.writeSubs(); err == nil {
				err = p.w.Flush()
			}
			p.wmu.Unlock()
		case c := <-p.ctrl:
			p.wmu.Lock()
			if err = p.w.WriteCommand(c.Name, c.Body); err == nil {
				err = p.w.Flush()
			}
			p.wmu.Unlock()
		case <-tick:
			ttl := uint16(s.cfg.HeartbeatTTL / (100 * time.Millisecond))
			pingBuf = zmtp.AppendPing(pingBuf[:0], ttl, nil)
			p.wmu.Lock()
			if err = p.w.WriteCommand(zmtp.CmdPing, pingBuf); err == nil {
				err = p.w.Flush()
			}
			p.wmu.Unlock()
		case <-p.quit:
			return
		case <-s.closing:
			p.wmu.Lock()
			p.linger()
			p.wmu.Unlock()
			return
		}
		if err != nil {
			p.shutdown(err)
			return
		}
	}
}

// maxWriteRounds bounds the batches the writer encodes before it looks at
// its other duties (heartbeats, PONGs, subscription changes, Close), so
// that senders keeping its queue full cannot hold those back.
const maxWriteRounds = 16

// writeQueued encodes the queued messages, taking them in batches of up to
// cap(batch), until the queue is empty or, if rounds > 0, after that many
// batches; the writer is then woken again for the rest.
func (p *peer) writeQueued(batch []Msg, rounds int) error {
	s := p.s
	for round := 1; ; round++ {
		b, n := p.outq.take(batch, p.written)
		p.written = 0
		s.rr.blocked.wakeIfWaiting()
		if len(b) == 0 {
			return nil
		}
		for _, m := range b {
			if err := p.write(m); err != nil {
				clear(b)
				return err
			}
		}
		clear(b)
		p.written = n
		if round == rounds {
			// take found messages, so the queue does not count the writer
			// as sleeping and no push would wake it: wake it here.
			signal(p.outq.ready)
			return nil
		}
	}
}

// write encodes one outgoing message. Subscription changes of SUB and
// XSUB do not come this way but through p.subctl (see writeSubs).
func (p *peer) write(m Msg) error {
	return p.w.WriteMessage(m.Frames)
}

// linger (called with p.wmu held) flushes what is queued (subscription changes, then messages)
// before s.lingerEnd (Config.Linger after Close or Shutdown began, or
// Shutdown's ctx deadline if sooner), then half-closes the connection so
// the peer reads everything before EOF. The reader ends the connection
// when the peer closes its side or the deadline passes; a Shutdown whose
// ctx ends cuts it at once.
func (p *peer) linger() {
	s := p.s
	if s.cfg.Linger < 0 {
		p.shutdown(ErrClosed)
		return
	}
	deadline := s.lingerEnd
	_ = p.conn.SetWriteDeadline(deadline)
	err := p.cw.flushRest() // what a direct write left
	if err == nil {
		err = p.writeSubs() // subscription changes not yet sent go first
	}
	if err == nil {
		err = p.writeQueued(make([]Msg, 0, maxBatch), 0)
	}
	if err == nil {
		err = p.w.Flush()
	}
	if err != nil {
		p.shutdown(err)
		return
	}
	if cw, ok := p.conn.(interface{ CloseWrite() error }); ok {
		p.lingerDL.Store(deadline.UnixNano())
		_ = p.conn.SetReadDeadline(deadline)
		_ = cw.CloseWrite()
		return
	}
	p.shutdown(ErrClosed)
}
