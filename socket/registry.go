package socket

import "fmt"

// addPeer registers a peer that finished its handshake: from now on Send
// and Recv see it. It holds s.mu, so that Close (which takes it too)
// either sees the peer or refuses it, and SUB/XSUB's subscriptions cannot
// change while the peer is given them.
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
		if err := s.router.add(p, s.cfg.RouterHandover); err != nil {
			return err
		}
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
	// With two peers, Recv fair-queues again: their readers read.
	s.kickDirect()
	for _, q := range old {
		signal(q.roleBack)
	}
	return nil
}

// removePeer unregisters a peer whose connection ended. What it sent and
// Recv did not take yet stays readable; an XPUB reports the
// subscriptions that went with it.
func (s *Socket) removePeer(p *peer) {
	// Keep what the peer sent before it went away. It is kept before the
	// peer leaves the list, so Recv finds it in one place or the other
	// (both pop the same queue) and never in neither.
	s.keepDeparted(p)
	s.peersMu.Lock()
	old := *s.peers.Load()
	n := make([]*peer, 0, len(old))
	for _, q := range old {
		if q != p {
			n = append(n, q)
		}
	}
	s.peers.Store(&n)
	if s.kind == Router {
		s.router.remove(p)
	}
	s.peersMu.Unlock()
	p.outq.release()
	if s.kind == XPub {
		for _, t := range p.subs.topics() {
			s.xpubUpdate(p, []byte(t), false, true)
		}
	}
	if s.kind == Pub || s.kind == XPub {
		s.pub.notifySubs()
	}
	s.rr.blocked.wake()
}
