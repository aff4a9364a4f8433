package socket

import (
	"context"
	"encoding/binary"
	"fmt"
)

func (s *Socket) sendRouter(ctx context.Context, m Msg) error {
	if len(m.Frames) < 2 {
		return fmt.Errorf("socket: ROUTER send needs an identity frame and a body")
	}
	s.peersMu.Lock()
	p := s.byID[string(m.Frames[0])]
	s.peersMu.Unlock()
	body := Msg{Frames: m.Frames[1:]}
	if p == nil {
		if s.cfg.RouterMandatory {
			return fmt.Errorf("%w: %q", ErrUnknownPeer, m.Frames[0])
		}
		s.st.dropped.Add(1)
		return nil
	}
	if !s.cfg.RouterMandatory {
		if !p.outq.push(body) {
			s.drop(p)
		}
		return nil
	}
	return s.sendTo(ctx, p, body)
}

// genID returns a ROUTER identity for a peer that did not send one: a zero
// byte followed by a 32-bit counter, as libzmq does.
func (s *Socket) genID() string {
	var b [5]byte
	binary.BigEndian.PutUint32(b[1:], s.nextID.Add(1))
	return string(b[:])
}
