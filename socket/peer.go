package socket

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/internal/zmtp"
)

// peer is one established connection. Its reader runs in the goroutine
// that owns the connection (serveConn); its writer in a second goroutine.
type peer struct {
	s        *Socket
	conn     net.Conn
	endpoint string
	remote   string
	id       string // ROUTER routing identity
	minor    uint8  // peer's ZMTP minor version
	r        *zmtp.Reader
	w        *zmtp.Writer

	// lingerDL is the read deadline Close's linger set (Unix ns; 0 = none).
	// alive restores it if it overwrote it, so a peer cannot keep Close
	// waiting.
	lingerDL atomic.Int64

	outq   *outQueue
	inq    *inQueue
	ctrl   chan zmtp.Command
	subctl subCtl // SUB/XSUB: subscription changes to announce

	quit     chan struct{}
	quitOnce sync.Once
	errMu    sync.Mutex
	err      error

	subs     subTable      // PUB/XPUB: what this peer subscribed to (changed by the reader)
	lastDrop atomic.Int64  // unix nanos of the last EventDropped
	drops    atomic.Uint64 // messages this peer missed

	peerTTL   time.Duration // from the peer's PINGs (reader only)
	lastAlive time.Time     // last read deadline extension (reader only)

	// Reader only: decoded messages not yet in inq, the room inq had
	// when last seen, and a block to carve frame slices from.
	batch  []Msg
	inRoom int
	fbuf   [][]byte
}

// maxBatch bounds the messages the reader decodes before handing them to
// the receive queue.
const maxBatch = 256

func (p *peer) shutdown(err error) {
	p.quitOnce.Do(func() {
		p.errMu.Lock()
		p.err = err
		p.errMu.Unlock()
		close(p.quit)
		p.conn.Close()
	})
}

func (p *peer) cause() error {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return p.err
}

// serveConn handshakes on c and, if that succeeds, runs the peer until the
// connection ends. It reports whether the handshake succeeded.
func (s *Socket) serveConn(c net.Conn, ep string, dialed bool, d *dialer) bool {
	remote := ep // unix and inproc peers have no useful address
	if a := c.RemoteAddr(); a != nil && a.Network() == "tcp" {
		remote = a.String()
	}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		c.Close()
		return false
	}
	if !dialed && len(s.pending) >= maxPendingHandshakes {
		// Connections that never finish their handshake each hold
		// buffers until HandshakeTimeout: bound how many can.
		s.mu.Unlock()
		c.Close()
		s.st.hsFail.Add(1)
		s.emit(Event{Type: EventHandshakeFailed, Endpoint: ep, Peer: remote, Err: errTooManyHandshakes})
		return false
	}
	s.pending[c] = struct{}{}
	s.mu.Unlock()

	p := &peer{
		s:        s,
		conn:     c,
		endpoint: ep,
		remote:   remote,
		r:        zmtp.NewReader(c, 0),
		w:        zmtp.NewWriter(c, 0),
		outq:     newOutQueue(s.cfg.SendHWM),
		inq:      newInQueue(s.cfg.RecvHWM),
		inRoom:   s.cfg.RecvHWM,
		ctrl:     make(chan zmtp.Command, 16),
		quit:     make(chan struct{}),
	}
	p.r.MaxMsgSize = s.cfg.MaxMsgSize
	switch m := s.cfg.MaxMsgSize; {
	case m < 0:
		p.r.MaxCmdSize = 1 << 40 // allocated only as data arrives
	case m > 64<<10:
		p.r.MaxCmdSize = m
	}
	if m := s.cfg.MaxMsgSize; m > 0 {
		p.r.MaxFrames = 1024 + int(m/32)
	}
	_ = c.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	info, err := zmtp.Handshake(p.r, p.w, s.hs)
	s.mu.Lock()
	delete(s.pending, c)
	s.mu.Unlock()
	if err == nil {
		_ = c.SetDeadline(time.Time{})
		p.minor = info.Greeting.Minor
		if info.Greeting.Major > 3 {
			p.minor = 1
		}
		p.id = string(info.Identity)
		switch {
		case s.kind == Router && p.id == "":
			p.id = s.genID()
		case s.kind == Router && p.id[0] == 0:
			// Identities starting with a zero byte are the ones a ROUTER
			// generates (as in libzmq): a peer may not claim one.
			err = fmt.Errorf("%w: a peer identity may not start with a zero byte", ErrIdentityInUse)
		}
		if err == nil {
			err = s.addPeer(p)
		}
	}
	if err != nil {
		c.Close()
		if s.closed.Load() || (d != nil && d.ctx.Err() != nil) {
			return false
		}
		s.st.hsFail.Add(1)
		s.log.Warn("handshake failed", "endpoint", ep, "peer", remote, "err", err)
		s.emit(Event{Type: EventHandshakeFailed, Endpoint: ep, Peer: remote, Err: err})
		return false
	}
	typ := EventAccepted
	if dialed {
		typ = EventConnected
	}
	s.log.Debug("peer connected", "endpoint", ep, "peer", remote, "type", info.SocketType)
	s.emit(Event{Type: typ, Endpoint: ep, Peer: remote})
	s.wake()

	writerDone := make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(writerDone)
		p.writeLoop()
	}()
	rerr := p.readLoop()
	p.shutdown(rerr)
	<-writerDone
	s.removePeer(p)
	err = p.cause()
	if errors.Is(err, zmtp.ErrTooLarge) {
		s.st.tooLarge.Add(1)
		err = fmt.Errorf("%w: %w", ErrMsgTooLarge, err)
	}
	if !s.closed.Load() {
		s.st.disconnects.Add(1)
		s.log.Debug("peer disconnected", "endpoint", ep, "peer", remote, "err", err)
		s.emit(Event{Type: EventDisconnected, Endpoint: ep, Peer: remote, Err: err})
	}
	return true
}

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
			p.flushIn()
			p.alive(false)
		}
		frames, cmd, err := p.r.Next(p.frameBuf())
		if err != nil {
			p.flushIn()
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !s.closed.Load() {
				return errHeartbeat
			}
			if err == io.EOF {
				return io.EOF
			}
			return err
		}
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
// and through it the other messages' bodies, alive.
func (p *peer) frameBuf() [][]byte {
	if cap(p.fbuf) < 4 {
		p.fbuf = make([][]byte, 0, 64)
	}
	return p.fbuf[:0]
}

// tookFrames accounts for the frames Next stored in the block returned by
// frameBuf, capping the message's slice so appending to it cannot touch
// the next message's frames.
func (p *peer) tookFrames(frames [][]byte) [][]byte {
	n := len(frames)
	if n == 0 || n > cap(p.fbuf) || &frames[0] != &p.fbuf[:1][0] {
		return frames // Next had to allocate its own
	}
	p.fbuf = p.fbuf[n:n:cap(p.fbuf)]
	return frames[:n:n]
}

// deliver queues an incoming message for Recv (reader goroutine only). It
// is batched with the messages already decoded and handed over when the
// batch is full, the receive queue may not have room for more, or the
// reader is about to wait for input.
func (p *peer) deliver(m Msg) {
	p.batch = append(p.batch, m)
	if len(p.batch) >= maxBatch || len(p.batch) >= p.inRoom {
		p.flushIn()
	}
}

// flushIn moves the batch into the receive queue, blocking while the queue
// is full. Closing the peer or the socket discards what is left.
func (p *peer) flushIn() {
	s := p.s
	b := p.batch
	for len(b) > 0 {
		k, room := p.inq.push(b)
		b = b[k:]
		p.inRoom = room
		if k > 0 && s.rwaiters.Load() > 0 {
			s.wakeRecv()
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
	p.batch = p.batch[:0]
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

// maxPendingHandshakes bounds the accepted connections that may be in
// their handshake at once; more are closed at once.
const maxPendingHandshakes = 256

var errTooManyHandshakes = fmt.Errorf("socket: more than %d handshakes in progress", maxPendingHandshakes)

// maxPeerSubs bounds the distinct subscriptions one peer may hold, so a
// flood of SUBSCRIBEs cannot cost unbounded memory.
const maxPeerSubs = 4096

// errTooManySubs disconnects a peer past maxPeerSubs.
var errTooManySubs = fmt.Errorf("socket: peer holds more than %d subscriptions", maxPeerSubs)

// subscription applies a peer's SUBSCRIBE or CANCEL (PUB/XPUB). As in
// libzmq, a peer holds a prefix at most once: a repeated SUBSCRIBE changes
// nothing and one CANCEL removes the prefix (libzmq's SUB sends SUBSCRIBE
// for every Subscribe, but CANCEL only for the last Unsubscribe).
func (p *peer) subscription(add bool, topic []byte) error {
	var changed, ok bool
	if add {
		if changed, ok = p.subs.addOnce(topic, maxPeerSubs); !ok {
			return errTooManySubs
		}
	} else {
		_, changed = p.subs.remove(topic)
	}
	if p.s.kind == XPub && changed {
		p.s.xpubUpdate(p, topic, add, false)
	}
	return nil
}

// xpubUpdate keeps the union of subscriptions and passes a change of the
// union to Recv as a \x01topic or \x00topic message.
func (s *Socket) xpubUpdate(p *peer, topic []byte, add, leaving bool) {
	s.mu.Lock()
	var changed bool
	if add {
		changed = s.xsubs.add(topic)
	} else {
		_, changed = s.xsubs.remove(topic)
	}
	s.mu.Unlock()
	if !changed || s.closed.Load() {
		return
	}
	m := subMsg(add, topic)
	if leaving {
		s.pushLeft(inMsg{m: m})
		return
	}
	p.deliver(m)
}

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
			// Subscription changes made before these messages go first,
			// as they would down libzmq's single pipe.
			select {
			case <-p.subctl.note:
				err = p.writeSubs()
			default:
			}
			if err == nil {
				err = p.writeQueued(batch, maxWriteRounds)
			}
			if err == nil {
				err = p.w.Flush()
			}
		case <-p.subctl.note:
			if err = p.writeSubs(); err == nil {
				err = p.w.Flush()
			}
		case c := <-p.ctrl:
			if err = p.w.WriteCommand(c.Name, c.Body); err == nil {
				err = p.w.Flush()
			}
		case <-tick:
			ttl := uint16(s.cfg.HeartbeatTTL / (100 * time.Millisecond))
			pingBuf = zmtp.AppendPing(pingBuf[:0], ttl, nil)
			if err = p.w.WriteCommand(zmtp.CmdPing, pingBuf); err == nil {
				err = p.w.Flush()
			}
		case <-p.quit:
			return
		case <-s.closing:
			p.linger()
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
		b := p.outq.take(batch)
		if len(b) == 0 {
			return nil
		}
		if s.waiters.Load() > 0 {
			s.wake()
		}
		for _, m := range b {
			if err := p.write(m); err != nil {
				clear(b)
				return err
			}
		}
		clear(b)
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

// linger flushes what is queued (subscription changes, then messages),
// within Config.Linger, then half-closes
// the connection so the peer reads everything before EOF. The reader ends
// the connection when the peer closes its side or the deadline passes.
func (p *peer) linger() {
	s := p.s
	if s.cfg.Linger < 0 {
		p.shutdown(ErrClosed)
		return
	}
	deadline := time.Now().Add(s.cfg.Linger)
	_ = p.conn.SetWriteDeadline(deadline)
	err := p.writeSubs() // subscription changes not yet sent go first
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
