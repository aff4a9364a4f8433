package socket

import (
	"context"
	"sync/atomic"
)

// roundRobin is the sending side of PUSH, DEALER, PAIR and REQ: each
// message goes to the next peer in turn whose queue has room.
type roundRobin struct {
	next atomic.Uint32 // where the next search starts
	// blocked holds senders that found every queue full (or no peer).
	// Writers wake them when they take messages, and the registry when
	// peers come and go.
	blocked waiters
}

// sendRR gives m to the next peer in round-robin order that has room.
func (s *Socket) sendRR(ctx context.Context, m Msg) (*peer, error) {
	n := msgBytes(m)
	if p := s.tryRR(m, n); p != nil {
		return p, nil
	}
	ctx, cancel := ctxFor(ctx, s.cfg.SendTimeout)
	defer cancel()
	var p *peer
	// A sender that got in passes the wake-up on to the next blocked one.
	// One that did not keeps it: every peer is then full, so their
	// writers will wake the senders again as they drain.
	err := s.rr.blocked.wait(ctx, nil, s.closing, func() bool {
		p = s.tryRR(m, n)
		return p != nil
	})
	return p, err
}

func (s *Socket) tryRR(m Msg, size int64) *peer {
	ps := *s.peers.Load()
	n := uint32(len(ps))
	if n == 0 {
		return nil
	}
	start := s.rr.next.Add(1)
	for i := uint32(0); i < n; i++ {
		p := ps[(start+i)%n]
		if p.senderWrites {
			ok, write := p.outq.pushBySender(m, size)
			if !ok {
				continue
			}
			if write {
				p.writeClaimed(true)
			}
			return p
		}
		if p.writeDirect(m, size) || p.outq.push(m, size) {
			return p
		}
	}
	return nil
}
