package socket

import "fmt"

func (s *Socket) addPeer(p *peer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	old := *s.peers.Load()
	if s.kind == Pair && len(old) > 0 {
		return fmt.Errorf("socket: PAIR already has a peer")
	}
	if s.kind == Router {
		if prev, ok := s.byID[p.id]; ok {
			if !s.cfg.RouterHandover {
				return fmt.Errorf("%w: identity %q is already in use", ErrIdentityInUse, p.id)
			}
			// Handover: the newest connection with an identity wins.
			prev.shutdown(fmt.Errorf("socket: identity taken over by a new connection"))
		}
		s.byID[p.id] = p
	}
	if s.kind == Sub || s.kind == XSub {
		// Under s.mu, like every change of s.subs: the peer gets each
		// subscription either here or as a later change, never both.
		s.replaySubs(p)
	}
	n := make([]*peer, 0, len(old)+1)
	n = append(n, old...)
	n = append(n, p)
	s.peers.Store(&n)
	return nil
}

func (s *Socket) removePeer(p *peer) {
	s.peersMu.Lock()
	old := *s.peers.Load()
	n := make([]*peer, 0, len(old))
	for _, q := range old {
		if q != p {
			n = append(n, q)
		}
	}
	s.peers.Store(&n)
	if s.kind == Router && s.byID[p.id] == p {
		delete(s.byID, p.id)
	}
	s.peersMu.Unlock()
	// Keep what the peer sent before it went away.
	s.keepDeparted(p)
	if s.kind == XPub {
		for _, t := range p.subs.topics() {
			s.xpubUpdate(p, []byte(t), false, true)
		}
	}
	s.wake()
}
