package socket

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Direct reads. A Recv that finds the receive queue empty on a socket with
// a single peer reads that peer's connection itself, in its own goroutine,
// instead of waiting for the connection's reader goroutine to read,
// decode and queue the message and then wake it: in a REQ/REP round trip
// that hand-off (a goroutine woken, often on another thread) costs as much
// as the network. The socket kinds that take part are REQ, REP, DEALER
// and ROUTER over tcp and ipc (directRecvKind), while one Recv waits: with
// several, the reader goroutine serves them (see takeRole).
//
// The right to read a connection (its zmtp.Reader and the reader-only
// fields of peer) is the reader role, held by one goroutine at a time
// (peer.role):
//
//   - roleReader: the reader goroutine holds it, as it always does on
//     sockets that do not take part;
//   - roleFree: lent out and held by nobody; the reader goroutine is
//     parked in lend and a Recv may take it;
//   - roleCaller: a Recv caller reads.
//
// The reader goroutine lends the role only at a message boundary with
// nothing buffered (peer.clean), when a Recv waits or asked for it
// (lendReq). A Recv that finds the reader goroutine blocked in a read asks
// for the role and kicks the read (kick: the read deadline moved to the
// past), which ends a read at a message boundary without loss (connReader)
// and is otherwise ignored. The same kick ends a Recv caller's read when
// its ctx ends, when Close begins, when a second peer connects (with
// two, the fair queue needs the reader goroutines again) or when a second
// Recv starts waiting.
//
// A Recv caller that got its message leaves the role free rather than
// waking the reader goroutine for it: the next Recv, which in a round trip
// comes within microseconds, takes it again at no cost. The reader
// goroutine takes the role back once it has been free for lendIdle (it
// checks with a timer that backs off up to lendCheckMax, and never beyond
// a quarter of the heartbeat deadline), so that heartbeats are answered,
// a dead peer is noticed and messages reach the receive queue, bounded by
// RecvHWM, while no one calls Recv.

// The reader role's states (peer.role).
const (
	roleReader int32 = iota
	roleFree
	roleCaller
)

const (
	// defaultLendIdle is how long the role must have been free before the
	// reader goroutine takes it back (Socket.lendIdle).
	defaultLendIdle = time.Millisecond
	// lendCheckMax bounds the backoff of the reader goroutine's checks.
	lendCheckMax = 64 * time.Millisecond
)

// errKicked ends a read that a kick stopped at a message boundary.
var errKicked = errors.New("socket: read stopped for another reader")

// directRecvKind reports whether Recv callers of kind k may read a
// connection themselves: the kinds whose reader does nothing but queue
// what it decodes.
func directRecvKind(k Kind) bool {
	return k == Req || k == Rep || k == Dealer || k == Router
}

// connReader is what a peer's zmtp.Reader reads from. It tells a kick
// from a heartbeat timeout: a kick ends a read at a message boundary with
// errKicked and is ignored inside a message, where ending the read would
// lose the part already decoded.
type connReader struct {
	p    *peer
	conn net.Conn
	// fresh is set by the role's holder before zmtp.Reader.Next when
	// nothing is buffered (peer.clean): until a byte comes, the read is at
	// a message boundary.
	fresh bool
	got   atomic.Int64 // bytes read, for tests
}

func (c *connReader) Read(b []byte) (int, error) {
	for {
		n, err := c.conn.Read(b)
		if n > 0 {
			c.fresh = false
			c.got.Add(int64(n))
			return n, err
		}
		var ne net.Error
		if err == nil || !errors.As(err, &ne) || !ne.Timeout() || !c.p.unkick() {
			return n, err
		}
		if c.fresh {
			return 0, errKicked
		}
	}
}

// kickState is the part of a peer that kicks share with the role's
// holder.
type kickState struct {
	mu     sync.Mutex // guards kicked and read-deadline changes
	kicked bool       // the read deadline is in the past because of a kick
}

// kick stops the read of whoever holds the reader role, if it is at a
// message boundary (see connReader), by moving the read deadline to the
// past; unkick puts it back. Any goroutine may kick.
func (p *peer) kick() {
	p.ks.mu.Lock()
	p.ks.kicked = true
	p.s.st.kicks.Add(1)
	_ = p.conn.SetReadDeadline(time.Unix(1, 0))
	p.ks.mu.Unlock()
}

// unkick reports whether a read that timed out was kicked; if so it
// restores the read deadline the kick replaced (role holder only).
func (p *peer) unkick() bool {
	p.ks.mu.Lock()
	defer p.ks.mu.Unlock()
	if !p.ks.kicked {
		return false
	}
	p.ks.kicked = false
	var dl time.Time
	if d := p.hbDeadline(); d > 0 {
		dl = p.lastAlive.Add(d)
	}
	_ = p.conn.SetReadDeadline(dl)
	if ld := p.lingerDL.Load(); ld != 0 {
		_ = p.conn.SetReadDeadline(time.Unix(0, ld))
	}
	return true
}

// lendable reports whether the reader goroutine should lend the role now:
// the peer takes part, nothing is buffered, the socket is open, it is the
// socket's only peer and one Recv (not several) waits or asked for the
// role.
func (p *peer) lendable() bool {
	s := p.s
	if !p.lends || !p.clean || s.closed.Load() {
		return false
	}
	if !p.lendReq.Load() && (s.in.blocked.waiting() == 0 || p.lentUnused) {
		return false
	}
	if s.in.waiting.Load() > 1 {
		return false // several receivers: see takeRole
	}
	ps := *s.peers.Load()
	return len(ps) == 1 && ps[0] == p
}

// lend (reader goroutine) lends the role and waits until it can take it
// back (see the top of this file). It returns an error if the peer ends
// meanwhile.
func (p *peer) lend() error {
	s := p.s
	hb := p.hbDeadline() // ours while we hold the role
	// Signals left from an earlier lend are stale: we hold the role.
	select {
	case <-p.roleBack:
	default:
	}
	select {
	case <-p.roleFreed:
	default:
	}
	p.watch.Store(false)
	p.lendReq.Store(false)
	lent := clock()
	p.lastFree.Store(lent)
	p.role.Store(roleFree)
	s.in.blocked.wake()
	check := s.lendIdle
	if p.lendTimer == nil {
		p.lendTimer = time.NewTimer(check)
	} else {
		p.lendTimer.Reset(check)
	}
	defer p.lendTimer.Stop()
	closing := s.closing
	for {
		force := false
		select {
		case <-p.roleBack:
			force = true
		case <-p.lendTimer.C:
			check = min(2*check, lendCheckMax)
			if hb > 0 {
				check = min(check, max(hb/4, s.lendIdle))
			}
			if closing != nil && p.role.Load() == roleCaller {
				// A Recv reads, maybe for long: no need to look again
				// before it gives the role up, which it then tells us.
				p.watch.Store(true)
				if p.role.Load() == roleCaller {
					continue
				}
			}
		case <-p.roleFreed:
			// Time again from here, keeping the backoff: in a run of
			// round trips this costs two wake-ups per check.
		case <-closing:
			closing, force = nil, true
		case <-p.quit:
			return errPeerGone
		}
		if p.role.Load() == roleReader {
			return nil // given back
		}
		if closing == nil {
			force = true
			if p.role.Load() == roleCaller {
				p.kick() // Close kicks too; this covers a Recv that just took it
			}
		}
		if p.role.Load() == roleFree && (force || clock()-p.lastFree.Load() >= int64(s.lendIdle)) &&
			p.role.CompareAndSwap(roleFree, roleReader) {
			// Lent for nothing: read before lending to a waiting Recv
			// again (one that asks still gets it).
			p.lentUnused = p.lastFree.Load() == lent
			return nil
		}
		p.lendTimer.Reset(check)
	}
}

// takeRole (Recv caller) takes the reader role of the socket's single
// peer if it is free and returns that peer, or asks the reader goroutine
// for it and returns nil. It does neither while other Recv calls wait
// too: with several receivers (a server's workers) the reader goroutine
// serves them better, reading many messages per system call; taking
// turns at the connection cost an RPC server a fifth of its calls/s.
func (s *Socket) takeRole() *peer {
	if !directRecvKind(s.kind) {
		return nil
	}
	ps := *s.peers.Load()
	if len(ps) != 1 || !ps[0].lends {
		return nil
	}
	p := ps[0]
	if s.in.waiting.Load() > 1 {
		// A free role goes back to the reader goroutine at once, or
		// what arrives would wait in the kernel until it took it back.
		if p.role.CompareAndSwap(roleFree, roleReader) {
			signal(p.roleBack)
		}
		return nil
	}
	select {
	case <-p.quit:
		return nil // ending: its reader goroutine removes it
	default:
	}
	switch p.role.Load() {
	case roleFree:
		if p.role.CompareAndSwap(roleFree, roleCaller) {
			return p
		}
	case roleReader:
		if !p.lendReq.Swap(true) {
			p.kick()
		}
	}
	return nil
}

// giveRole (Recv caller) ends its hold of p's reader role: it leaves the
// role free for the next Recv, or gives it back to the reader goroutine
// when back is set or a message is partly buffered (only the reader
// goroutine reads on from there).
func (s *Socket) giveRole(p *peer, back bool) { s.giveRoleAt(p, back, clock()) }

// giveRoleAt is giveRole for a caller that has just read the clock: now.
func (s *Socket) giveRoleAt(p *peer, back bool, now int64) {
	s.in.direct.CompareAndSwap(p, nil)
	if !back && (s.in.waiting.Load() > 1 || !p.clean && !p.r.Complete()) {
		back = true // others wait to receive (see takeRole), or a message is partly read
	}
	p.lastFree.Store(now)
	if back {
		// Straight to the reader goroutine: a Recv cannot take it again
		// before the reader goroutine ran.
		p.role.Store(roleReader)
		signal(p.roleBack)
		return
	}
	p.role.Store(roleFree)
	if p.watch.Load() && p.watch.Swap(false) {
		signal(p.roleFreed) // the reader goroutine starts timing again
	}
	// Another Recv waiting can read next.
	s.in.blocked.wakeIfWaiting()
}

// kickDirect kicks a Recv caller reading a connection itself, so that it
// sees what changed (Close began, a peer connected).
func (s *Socket) kickDirect() {
	if p := s.in.direct.Load(); p != nil {
		p.kick()
	}
}

// readDirect (Recv caller holding p's reader role) reads the next message
// from p's connection. It reports done = false, having given the role
// back, when Recv should wait in the usual way instead (the peer ended,
// another connected, a message is partly buffered).
func (s *Socket) readDirect(ctx context.Context, p *peer) (im inMsg, done bool, err error) {
	s.in.direct.Store(p)
	// Close and addPeer change what they check before they look at
	// s.in.direct: one of us sees the other.
	if s.closed.Load() {
		s.giveRole(p, true)
		return inMsg{}, true, ErrClosed
	}
	if ps := *s.peers.Load(); len(ps) != 1 || ps[0] != p || !(p.clean || p.r.Complete()) {
		s.giveRole(p, true)
		return inMsg{}, false, nil
	}
	// What the reader goroutine queued before it lent the role goes first.
	if im, ok := s.tryRecv(); ok {
		s.giveRole(p, false)
		return im, true, nil
	}
	if ctx.Done() != nil {
		if ctx.Err() != nil {
			s.giveRole(p, false)
			return inMsg{}, true, ctxErr(ctx)
		}
		stop := context.AfterFunc(ctx, p.kick)
		defer stop()
	}
	for {
		p.rd.fresh = p.clean
		frames, cmd, err := p.r.Next(p.frameBuf())
		p.clean = p.r.Buffered() == 0
		if err != nil {
			if errors.Is(err, errKicked) {
				switch ps := *s.peers.Load(); {
				case s.closed.Load():
					s.giveRole(p, true)
					return inMsg{}, true, ErrClosed
				case ctx.Err() != nil:
					s.giveRole(p, false)
					return inMsg{}, true, ctxErr(ctx)
				case len(ps) != 1 || ps[0] != p || s.in.waiting.Load() > 1:
					// Another peer, or other receivers (see takeRole):
					// the reader goroutine reads from here.
					s.giveRole(p, true)
					return inMsg{}, false, nil
				}
				continue // a kick meant for an earlier holder
			}
			p.shutdown(p.readErr(err))
			s.giveRole(p, true)
			return inMsg{}, false, nil
		}
		p.alive(false)
		if frames == nil {
			if err := p.command(cmd); err != nil {
				p.shutdown(err)
				s.giveRole(p, true)
				return inMsg{}, false, nil
			}
			continue
		}
		frames = p.tookFrames(frames)
		at := clock()
		if s.closed.Load() {
			s.giveRole(p, true)
			return inMsg{}, true, ErrClosed // lingering: input is discarded
		}
		s.st.directRecv.Add(1)
		s.giveRoleAt(p, false, at)
		return inMsg{p: p, m: Msg{Frames: frames}, at: at}, true, nil
	}
}

// readErr turns the error that ended a read into the peer's cause.
func (p *peer) readErr(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && !p.s.closed.Load() {
		return errHeartbeat
	}
	return err
}
