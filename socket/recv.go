package socket

import (
	"context"
	"fmt"
)

// Recv returns the next message, fair-queued among peers. It blocks until
// a message arrives, ctx ends or, if ctx has no deadline,
// Config.RecvTimeout passes. ROUTER prepends the sender's identity as
// Frames[0]; REQ and REP strip the envelope. PUB and PUSH return
// ErrNotSupported; XPUB returns subscription changes (\x01topic,
// \x00topic). The returned frames belong to the caller (see Msg).
func (s *Socket) Recv(ctx context.Context) (Msg, error) {
	if !s.kind.canRecv() {
		return Msg{}, fmt.Errorf("%w: Recv on %s", ErrNotSupported, s.kind)
	}
	var (
		m   Msg
		err error
	)
	switch s.kind {
	case Req:
		m, err = s.recvReq(ctx)
	case Rep:
		m, err = s.recvRep(ctx)
	default:
		var im inMsg
		im, err = s.recvIn(ctx)
		m = im.m
		if err == nil && s.kind == Router {
			f := make([][]byte, 0, len(m.Frames)+1)
			f = append(f, []byte(im.p.id))
			m.Frames = append(f, m.Frames...)
		}
	}
	if err == nil {
		s.st.received.Add(1)
	}
	return m, err
}

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
	for {
		s.rwaiters.Add(1)
		im, ok := s.tryRecv()
		if !ok {
			select {
			case <-s.inReady:
				s.rwakes.Add(1)
			case <-ctx.Done():
				s.rwaiters.Add(-1)
				return inMsg{}, ctxErr(ctx)
			case <-s.closing:
				s.rwaiters.Add(-1)
				return inMsg{}, ErrClosed
			}
		}
		// A receiver that got a message passes the wake-up on to the
		// next blocked one. One that did not keeps it: every queue was
		// empty, and the readers wake receivers again when they add.
		if s.rwaiters.Add(-1) > 0 && ok {
			s.wakeRecv()
		}
		if ok {
			return im, nil
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
	start := s.rrIn.Add(1)
	for i := uint32(0); i < n; i++ {
		p := ps[(start+i)%n]
		if m, ok := p.inq.pop(); ok {
			return inMsg{p: p, m: m}, true
		}
	}
	return inMsg{}, false
}

type inMsg struct {
	p *peer
	m Msg
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
	s.leftMu.Lock()
	kept := len(s.left)
	for _, q := range s.departed {
		kept += q.inq.len()
	}
	if over := kept + k - s.cfg.RecvHWM; over > 0 {
		s.st.dropped.Add(uint64(p.inq.dropNewest(over)))
	}
	if p.inq.len() > 0 {
		s.departed = append(s.departed, p)
		s.leftN.Add(1)
	}
	s.leftMu.Unlock()
	s.wakeRecv()
}

// pushLeft keeps a message not tied to a live peer (XPUB's own
// unsubscriptions) for Recv, bounded by RecvHWM; beyond it messages are
// dropped and counted in Stats.Dropped.
func (s *Socket) pushLeft(im inMsg) {
	s.leftMu.Lock()
	if len(s.left) >= s.cfg.RecvHWM {
		s.leftMu.Unlock()
		s.st.dropped.Add(1)
		return
	}
	s.left = append(s.left, im)
	s.leftN.Add(1)
	s.leftMu.Unlock()
	s.wakeRecv()
}

func (s *Socket) popLeft() (inMsg, bool) {
	if s.leftN.Load() == 0 {
		return inMsg{}, false
	}
	s.leftMu.Lock()
	defer s.leftMu.Unlock()
	for len(s.departed) > 0 {
		p := s.departed[0]
		if m, ok := p.inq.pop(); ok {
			return inMsg{p: p, m: m}, true
		}
		s.departed[0] = nil
		s.departed = s.departed[1:]
		s.leftN.Add(-1)
	}
	if len(s.left) == 0 {
		return inMsg{}, false
	}
	im := s.left[0]
	s.left[0] = inMsg{}
	s.left = s.left[1:]
	s.leftN.Add(-1)
	return im, true
}

func (s *Socket) wakeRecv() { signal(s.inReady) }
