package socket

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/fastmq/fastmq/internal/zmtp"
)

// hbDeadline returns how long the peer may stay silent before it is
// declared dead (0 = no limit): our interval plus timeout (only for ZMTP
// 3.1 peers, which answer PINGs) and the TTL the peer announced, whichever
// is shorter. As in libzmq each limit holds on its own: a peer cannot lift
// ours by announcing a long TTL.
func (p *peer) hbDeadline() time.Duration {
	var d time.Duration
	if iv := p.s.cfg.HeartbeatInterval; iv > 0 && p.minor >= 1 {
		d = iv + p.s.cfg.HeartbeatTimeout
	}
	if p.peerTTL > 0 && (d == 0 || p.peerTTL < d) {
		d = p.peerTTL
	}
	return d
}

// alive records traffic from the peer (any traffic counts, as in libzmq)
// by pushing the read deadline out. Unless forced, it does so at most every
// quarter of the allowed silence, to keep the cost per message low.
func (p *peer) alive(force bool) {
	d := p.hbDeadline()
	if d <= 0 || p.s.closed.Load() {
		return // no heartbeating, or Close owns the deadline now
	}
	now := time.Now()
	if !force && now.Sub(p.lastAlive) < d/4 {
		return
	}
	p.lastAlive = now
	p.ks.mu.Lock()
	defer p.ks.mu.Unlock()
	if p.ks.kicked {
		return // the kick's deadline stays; unkick restores this one
	}
	_ = p.conn.SetReadDeadline(now.Add(d))
	if dl := p.lingerDL.Load(); dl != 0 {
		_ = p.conn.SetReadDeadline(time.Unix(0, dl))
	}
}

var errHeartbeat = errors.New("socket: heartbeat timeout")

func (p *peer) readLoop() error {
	s := p.s
	p.alive(true)
	for {
		if !p.r.Complete() {
			// The next read may block: hand over what we have first, and
			// count the traffic we had as a sign of life.
			if len(p.batch) > 0 {
				p.flushIn()
				// On a ROUTER, we write what the receivers send in
				// answer meanwhile (writesReplies): no need to wake the
				// writer goroutine for it. Claimed after flushIn, which
				// may wait for receivers whose Sends would otherwise
				// wait for us.
				claimed := p.writesReplies && p.outq.claim()
				// Let the receivers just woken run before we read again:
				// what they send in answer comes back sooner, and the
				// next read finds more at once instead of an empty
				// connection (a read that costs a system call for
				// nothing, then a wait for the poller). An inproc read
				// costs no system call: there we read on.
				if !p.inproc {
					runtime.Gosched()
				}
				if claimed {
					p.writeClaimed(false)
				}
			}
			p.alive(false)
			// A Recv waits: let it read the connection itself.
			if p.lendable() {
				if err := p.lend(); err != nil {
					return err
				}
				continue
			}
		}
		p.rd.fresh = p.clean
		frames, cmd, err := p.r.Next(p.frameBuf())
		p.clean = p.r.Buffered() == 0
		if err != nil {
			if errors.Is(err, errKicked) {
				continue // a Recv asked for the role (or a stale kick)
			}
			p.flushIn()
			return p.readErr(err)
		}
		p.lentUnused = false
		if frames == nil {
			if err := p.command(cmd); err != nil {
				p.flushIn()
				return err
			}
			continue
		}
		frames = p.tookFrames(frames)
		if s.closed.Load() {
			continue // lingering: discard input
		}
		switch s.kind {
		case Push:
			continue
		case Pub, XPub:
			if len(frames) == 1 && len(frames[0]) > 0 && frames[0][0] <= 1 {
				if err := p.subscription(frames[0][0] == 1, frames[0][1:]); err != nil {
					return err
				}
				continue
			}
			if s.kind == Pub {
				continue
			}
			// XPUB passes other upstream messages to the application, as
			// libzmq does.
		case Sub, XSub:
			if !s.mySubs.Load().match(frames[0]) {
				continue
			}
		}
		p.deliver(Msg{Frames: frames})
	}
}

// frameBuf returns an empty slice for Next to append frames to, carved
// from a shared block. Messages handed to Recv keep their frame slices;
// the block is never reused, only replaced. The block is kept small
// because a message the application holds on to keeps the whole block,
// and through it the other messages' bodies, alive. On a ROUTER the slot
// before the slice is kept for the sender's identity (see tookFrames).
func (p *peer) frameBuf() [][]byte {
	if cap(p.fbuf) < 5 {
		p.fbuf = make([][]byte, 0, 64)
	}
	if p.s.kind == Router {
		return p.fbuf[1:1]
	}
	return p.fbuf[:0]
}

// tookFrames accounts for the frames Next stored in the block returned by
// frameBuf, capping the message's slice so appending to it cannot touch
// the next message's frames. On a ROUTER it prepends the sender's
// identity, as Recv returns it, in the slot frameBuf kept for it: no
// allocation per message.
func (p *peer) tookFrames(frames [][]byte) [][]byte {
	n := len(frames)
	if n == 0 {
		return frames
	}
	id := 0
	if p.s.kind == Router {
		id = 1
	}
	if n+id > cap(p.fbuf) || &frames[0] != &p.fbuf[id : id+1][0] {
		// Next had to allocate its own.
		if id == 1 {
			return append([][]byte{p.idFrame()}, frames...)
		}
		return frames
	}
	if id == 1 {
		frames = p.fbuf[:n+1]
		frames[0] = p.idFrame()
	}
	p.fbuf = p.fbuf[n+id : n+id : cap(p.fbuf)]
	return frames[: n+id : n+id]
}

// idFrame returns a copy of the peer's ROUTER identity for a received
// message, carved from a shared block that is never reused, as the frame
// slices are (the caller owns the message's frames and may modify them).
func (p *peer) idFrame() []byte {
	if cap(p.idbuf)-len(p.idbuf) < len(p.id) {
		p.idbuf = make([]byte, 0, max(1024, len(p.id)))
	}
	k := len(p.idbuf)
	p.idbuf = append(p.idbuf, p.id...)
	return p.idbuf[k:len(p.idbuf):len(p.idbuf)]
}

// deliver queues an incoming message for Recv (reader goroutine only). It
// is batched with the messages already decoded and handed over when the
// batch is full, the receive queue may not have room for more, or the
// reader is about to wait for input.
func (p *peer) deliver(m Msg) {
	n := msgBytes(m)
	p.batch = append(p.batch, m)
	p.sizes = append(p.sizes, n)
	p.batchBytes += n
	if len(p.batch) >= maxBatch || len(p.batch) >= p.inRoom || p.batchBytes >= p.inRoomBytes {
		p.flushIn()
	}
}

// flushIn moves the batch into the receive queue, blocking while the queue
// is full. Closing the peer or the socket discards what is left.
func (p *peer) flushIn() {
	s := p.s
	b, sizes := p.batch, p.sizes
	var at int64
	if len(b) > 0 {
		at = clock()
	}
	for len(b) > 0 {
		k, room, roomBytes := p.inq.push(b, sizes, at)
		b, sizes = b[k:], sizes[k:]
		p.inRoom, p.inRoomBytes = room, roomBytes
		if k > 0 {
			s.in.blocked.wakeIfWaiting()
		}
		if len(b) == 0 {
			break
		}
		select {
		case <-p.inq.room:
		case <-p.quit:
			b = nil
		case <-s.closing:
			b = nil
		}
		// We may have stopped reading for a while: do not mistake that
		// for a dead peer.
		p.alive(true)
	}
	clear(p.batch)
	p.batch, p.sizes, p.batchBytes = p.batch[:0], p.sizes[:0], 0
}

func (p *peer) command(cmd zmtp.Command) error {
	switch cmd.Name {
	case zmtp.CmdPing:
		ttl, ctx, err := zmtp.ParsePing(cmd.Body)
		if err != nil {
			return err
		}
		p.peerTTL = time.Duration(ttl) * 100 * time.Millisecond
		select {
		case p.ctrl <- zmtp.Command{Name: zmtp.CmdPong, Body: ctx}:
		default:
		}
		p.alive(true)
	case zmtp.CmdPong:
		// Any traffic counts as liveness; alive already ran.
	case zmtp.CmdSubscribe, zmtp.CmdCancel:
		if p.s.kind == Pub || p.s.kind == XPub {
			return p.subscription(cmd.Name == zmtp.CmdSubscribe, cmd.Body)
		}
	case zmtp.CmdError:
		reason, err := zmtp.ParseError(cmd.Body)
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: %q", zmtp.ErrPeerError, reason)
	}
	// Other commands are ignored, as RFC 37 asks.
	return nil
}
