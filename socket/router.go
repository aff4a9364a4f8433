package socket

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// routerState is a ROUTER's identity routing: which peer holds which
// routing identity, and the counter generated identities come from.
type routerState struct {
	mu     sync.Mutex // guards byID
	byID   map[string]*peer
	nextID atomic.Uint32
}

func (r *routerState) init() {
	r.byID = make(map[string]*peer)
	r.nextID.Store(rand.Uint32())
}

// add gives p its identity. An identity in use is refused unless handover
// is set; then the newest connection with an identity wins and the old
// one is shut down.
func (r *routerState) add(p *peer, handover bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.byID[p.id]; ok {
		if !handover {
			return fmt.Errorf("%w: identity %q is already in use", ErrIdentityInUse, p.id)
		}
		prev.shutdown(fmt.Errorf("socket: identity taken over by a new connection"))
	}
	r.byID[p.id] = p
	return nil
}

// remove frees p's identity, unless another connection took it over.
func (r *routerState) remove(p *peer) {
	r.mu.Lock()
	if r.byID[p.id] == p {
		delete(r.byID, p.id)
	}
	r.mu.Unlock()
}

// lookup returns the peer holding identity id, or nil.
func (r *routerState) lookup(id []byte) *peer {
	r.mu.Lock()
	p := r.byID[string(id)]
	r.mu.Unlock()
	return p
}

// genID returns a ROUTER identity for a peer that did not send one: a zero
// byte followed by a 32-bit counter, as libzmq does.
func (r *routerState) genID() string {
	var b [5]byte
	binary.BigEndian.PutUint32(b[1:], r.nextID.Add(1))
	return string(b[:])
}

// checkIdentity gives a peer that sent no identity a generated one and
// refuses one that claims a generated one.
func (r *routerState) checkIdentity(p *peer) error {
	switch {
	case p.id == "":
		p.id = r.genID()
	case p.id[0] == 0:
		// Identities starting with a zero byte are the ones a ROUTER
		// generates (as in libzmq): a peer may not claim one.
		return fmt.Errorf("%w: a peer identity may not start with a zero byte", ErrIdentityInUse)
	}
	return nil
}

func (s *Socket) sendRouter(ctx context.Context, m Msg) error {
	if len(m.Frames) < 2 {
		return fmt.Errorf("socket: ROUTER send needs an identity frame and a body")
	}
	p := s.router.lookup(m.Frames[0])
	body := Msg{Frames: m.Frames[1:]}
	if p == nil {
		if s.cfg.RouterMandatory {
			return fmt.Errorf("%w: %q", ErrUnknownPeer, m.Frames[0])
		}
		s.st.dropped.Add(1)
		return nil
	}
	if !s.cfg.RouterMandatory {
		if !p.outq.pushDrop(body, msgBytes(body)) {
			s.drop(p)
		}
		return nil
	}
	return s.sendTo(ctx, p, body)
}
