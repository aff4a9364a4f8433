package socket

import "context"

// sendRR gives m to the next peer in round-robin order that has room.
func (s *Socket) sendRR(ctx context.Context, m Msg) (*peer, error) {
	if p := s.tryRR(m); p != nil {
		return p, nil
	}
	ctx, cancel := ctxFor(ctx, s.cfg.SendTimeout)
	defer cancel()
	for {
		s.waiters.Add(1)
		p := s.tryRR(m)
		if p == nil {
			select {
			case <-s.room:
			case <-ctx.Done():
				s.waiters.Add(-1)
				return nil, ctxErr(ctx)
			case <-s.closing:
				s.waiters.Add(-1)
				return nil, ErrClosed
			}
		}
		// A sender that got in passes the wake-up on to the next blocked
		// one. One that did not keeps it: every peer is then full, so
		// their writers will wake the senders again as they drain.
		if s.waiters.Add(-1) > 0 && p != nil {
			s.wake()
		}
		if p != nil {
			return p, nil
		}
	}
}

func (s *Socket) tryRR(m Msg) *peer {
	ps := *s.peers.Load()
	n := uint32(len(ps))
	if n == 0 {
		return nil
	}
	start := s.rr.Add(1)
	for i := uint32(0); i < n; i++ {
		p := ps[(start+i)%n]
		if p.outq.push(m) {
			return p
		}
	}
	return nil
}
