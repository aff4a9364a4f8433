package socket

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Recv returns the next message, fair-queued among peers. It blocks until
// a message arrives, ctx ends or, if ctx has no deadline,
// Config.RecvTimeout passes. ROUTER prepends the sender's identity as
// Frames[0]; REQ and REP strip the envelope. PUB and PUSH return
// ErrNotSupported; XPUB returns subscription changes (\x01topic,
// \x00topic). The returned frames belong to the caller (see Msg).
//
// A Recv on a REQ, REP, DEALER or ROUTER whose single peer is on tcp or
// ipc may read the connection itself (see the package doc); if ctx ends
// while part of a message has arrived, it returns the message once it is
// whole (or the error if the connection fails), so that nothing is lost.
func (s *Socket) Recv(ctx context.Context) (Msg, error) {
	m, _, err := s.recv(ctx)
	return m, err
}

// RecvAt is Recv that also says when the message arrived: when the
// connection's reader handed it to the socket's receive queue (for the
// messages of one read, the end of that read). The time since then is
// what it waited in the queue, which a server with deadlines counts
// against them. The time carries a monotonic clock reading.
func (s *Socket) RecvAt(ctx context.Context) (Msg, time.Time, error) {
	m, at, err := s.recv(ctx)
	if err != nil {
		return m, time.Time{}, err
	}
	return m, clockTime(at), nil
}

func (s *Socket) recv(ctx context.Context) (Msg, int64, error) {
	if !s.kind.canRecv() {
		return Msg{}, 0, fmt.Errorf("%w: Recv on %s", ErrNotSupported, s.kind)
	}
	var (
		im  inMsg
		err error
	)
	switch s.kind {
	case Req:
		im, err = s.recvReq(ctx)
	case Rep:
		im, err = s.recvRep(ctx)
	default:
		// A ROUTER's reader prepended the sender's identity already
		// (peer.tookFrames).
		im, err = s.recvIn(ctx)
	}
	if err == nil {
		s.st.received.Add(1)
	}
	return im.m, im.at, err
}

// fairQueue is the receiving side every kind that receives shares. Each
// peer has its own bounded queue (peer.inq); Recv visits them round-robin.
// The queues of peers that went away with messages still in them wait in
// departed, oldest first, and are read from in place (so a Recv that still
// holds the old peer list pops from the same queue, in order); XPUB's own
// unsubscriptions wait in left.
type fairQueue struct {
	next atomic.Uint32 // where the next visit starts
	// blocked holds receivers that found every queue empty; readers wake
	// them when they add messages.
	blocked waiters

	// direct is the peer whose connection a Recv reads itself, if any
	// (recvdirect.go): Close and a new peer kick it.
	direct atomic.Pointer[peer]
	// waiting counts the Recv calls past the fast path: a Recv reads a
	// connection itself only when it is the one (several take turns
	// better through the reader goroutine, which reads many messages at
	// once and hands them out).
	waiting atomic.Int32

	// queued counts the messages in the peers' receive queues (departed
	// ones included): a receiver passes its wake-up on only while some
	// are left (waiters.more).
	queued   atomic.Int64
	leftN    atomic.Int32 // len(departed) + len(left), a hint for the fast path
	mu       sync.Mutex   // guards departed and left
	departed []*peer
	left     []inMsg
}

// inMsg is a received message, the peer it came from (nil for XPUB's own
// unsubscriptions) and when it arrived (see clock).
type inMsg struct {
	p  *peer
	m  Msg
	at int64
}

// clockBase is where clock counts from.
var clockBase = time.Now()

// clock returns the monotonic time since clockBase in nanoseconds: when a
// message arrived, as its receive queue keeps it.
func clock() int64 { return int64(time.Since(clockBase)) }

// clockTime turns a clock reading back into a time.Time.
func clockTime(at int64) time.Time { return clockBase.Add(time.Duration(at)) }

// recvIn takes the next incoming message, visiting the peers' queues
// round-robin (fair queueing).
func (s *Socket) recvIn(ctx context.Context) (inMsg, error) {
	if s.closed.Load() {
		return inMsg{}, ErrClosed
	}
	if im, ok := s.tryRecv(); ok {
		return im, nil
	}
	ctx, cancel := ctxFor(ctx, s.cfg.RecvTimeout)
	defer cancel()
	if s.in.waiting.Add(1) > 1 {
		// A Recv reading a connection itself gives it back to the
		// reader goroutine, which serves several receivers better.
		s.kickDirect()
	}
	defer s.in.waiting.Add(-1)
	for {
		var (
			im  inMsg
			own *peer // a peer whose reader role we took (recvdirect.go)
		)
		// A receiver that got a message passes the wake-up on to the next
		// blocked one. One that did not keeps it: every queue was empty,
		// and the readers wake receivers again when they add (or lend
		// their role).
		err := s.in.blocked.wait(ctx, nil, s.closing, func() bool {
			var ok bool
			if im, ok = s.tryRecv(); ok {
				return true
			}
			own = s.takeRole()
			return own != nil
		})
		if err != nil || own == nil {
			return im, err
		}
		im, done, err := s.readDirect(ctx, own)
		if done {
			return im, err
		}
	}
}

func (s *Socket) tryRecv() (inMsg, bool) {
	if im, ok := s.popLeft(); ok {
		return im, true
	}
	ps := *s.peers.Load()
	n := uint32(len(ps))
	if n == 0 {
		return inMsg{}, false
	}
	start := s.in.next.Add(1)
	for i := uint32(0); i < n; i++ {
		p := ps[(start+i)%n]
		if m, at, ok := p.inq.pop(); ok {
			return inMsg{p: p, m: m, at: at}, true
		}
	}
	return inMsg{}, false
}

// keepDeparted keeps the queue of a peer that went away for Recv, if it
// still holds messages. Messages kept from departed peers are bounded by
// RecvHWM like any peer's queue, so a peer that reconnects again and again
// cannot grow memory past it: beyond it the newest are dropped and counted
// in Stats.Dropped.
func (s *Socket) keepDeparted(p *peer) {
	k := p.inq.len()
	if k == 0 {
		return
	}
	q := &s.in
	q.mu.Lock()
	kept := len(q.left)
	for _, d := range q.departed {
		kept += d.inq.len()
	}
	if over := kept + k - s.cfg.RecvHWM; over > 0 {
		s.st.dropped.Add(uint64(p.inq.dropNewest(over)))
	}
	var keptBytes int64
	for _, d := range q.departed {
		keptBytes += d.inq.size()
	}
	if keptBytes > 0 {
		s.st.dropped.Add(uint64(p.inq.dropBytes(s.cfg.RecvHWMBytes - keptBytes)))
	}
	if p.inq.len() > 0 {
		q.departed = append(q.departed, p)
		q.leftN.Add(1)
	}
	q.mu.Unlock()
	q.blocked.wake()
}

// pushLeft keeps a message not tied to a live peer (XPUB's own
// unsubscriptions) for Recv, bounded by RecvHWM; beyond it messages are
// dropped and counted in Stats.Dropped.
func (s *Socket) pushLeft(im inMsg) {
	q := &s.in
	q.mu.Lock()
	if len(q.left) >= s.cfg.RecvHWM {
		q.mu.Unlock()
		s.st.dropped.Add(1)
		return
	}
	q.left = append(q.left, im)
	q.leftN.Add(1)
	q.mu.Unlock()
	q.blocked.wake()
}

func (s *Socket) popLeft() (inMsg, bool) {
	q := &s.in
	if q.leftN.Load() == 0 {
		return inMsg{}, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.departed) > 0 {
		p := q.departed[0]
		if m, at, ok := p.inq.pop(); ok {
			return inMsg{p: p, m: m, at: at}, true
		}
		q.departed[0] = nil
		q.departed = q.departed[1:]
		q.leftN.Add(-1)
	}
	if len(q.left) == 0 {
		return inMsg{}, false
	}
	im := q.left[0]
	q.left[0] = inMsg{}
	q.left = q.left[1:]
	q.leftN.Add(-1)
	return im, true
}
