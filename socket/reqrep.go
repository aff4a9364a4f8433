package socket

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
)

// REQ and REP keep the request/reply envelope state machine (REQ: Send,
// Recv, Send...; REP: Recv, Send, Recv...) here, each in a small struct
// with its own lock. REQ sends through the round-robin of roundrobin.go,
// REP replies through sendTo; both receive through recv.go's fair queue.

// reqState is a REQ's state: the request that is out and where it went.
// mu is held to check and commit a step, never while Send or Recv block,
// so a Recv keeps its own ctx while a Send waits for room.
type reqState struct {
	mu      sync.Mutex
	peer    *peer  // the peer the current request went to
	waiting bool   // a request is out and its reply not taken yet
	sending bool   // a Send is on its way
	id      uint32 // the current request's id (Config.ReqCorrelate)
}

// beginSend checks that a request may be sent now and returns its id.
func (r *reqState) beginSend(relaxed bool) (uint32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if (r.waiting && !relaxed) || r.sending {
		return 0, fmt.Errorf("%w: REQ must receive the reply before sending again", ErrState)
	}
	r.sending = true
	return r.id + 1, nil
}

// endSend records the outcome of the Send beginSend allowed: on success,
// request id to p is now the one whose reply Recv waits for.
func (r *reqState) endSend(id uint32, p *peer, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sending = false
	if err != nil {
		return
	}
	r.id, r.peer, r.waiting = id, p, true
}

// current returns the request whose reply is awaited, if any.
func (r *reqState) current() (p *peer, id uint32, waiting bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peer, r.id, r.waiting
}

// replied takes the reply to request id, unless a newer request was sent
// meanwhile.
func (r *reqState) replied(id uint32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.id != id {
		return false
	}
	r.waiting = false
	return true
}

func (s *Socket) sendReq(ctx context.Context, m Msg) error {
	id, err := s.req.beginSend(s.cfg.ReqRelaxed)
	if err != nil {
		return err
	}
	frames := make([][]byte, 0, len(m.Frames)+2)
	if s.cfg.ReqCorrelate {
		frames = append(frames, binary.BigEndian.AppendUint32(nil, id))
	}
	frames = append(frames, []byte{})
	frames = append(frames, m.Frames...)
	p, err := s.sendRR(ctx, Msg{Frames: frames})
	s.req.endSend(id, p, err)
	return err
}

func (s *Socket) recvReq(ctx context.Context) (inMsg, error) {
	if _, _, waiting := s.req.current(); !waiting {
		return inMsg{}, fmt.Errorf("%w: REQ must send a request before receiving", ErrState)
	}
	ctx, cancel := ctxFor(ctx, s.cfg.RecvTimeout)
	defer cancel()
	for {
		im, err := s.recvIn(ctx)
		if err != nil {
			return inMsg{}, err
		}
		p, id, waiting := s.req.current()
		if !waiting || im.p != p {
			continue // not from the peer we asked: discard
		}
		f := im.m.Frames
		if s.cfg.ReqCorrelate {
			if len(f) < 1 || len(f[0]) != 4 || binary.BigEndian.Uint32(f[0]) != id {
				continue
			}
			f = f[1:]
		}
		if len(f) < 1 || len(f[0]) != 0 {
			continue // malformed reply
		}
		if !s.req.replied(id) {
			continue // a newer request was sent meanwhile
		}
		im.m = Msg{Frames: f[1:]}
		return im, nil
	}
}

// repState is a REP's state: the request owed a reply, with the peer it
// came from and its envelope (the frames up to the empty delimiter).
type repState struct {
	mu      sync.Mutex
	pending bool
	peer    *peer
	env     [][]byte
}

// isPending reports whether a request is owed a reply.
func (r *repState) isPending() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending
}

// set records a request owed a reply.
func (r *repState) set(p *peer, env [][]byte) {
	r.mu.Lock()
	r.pending, r.peer, r.env = true, p, env
	r.mu.Unlock()
}

// take returns the request owed a reply and clears it; ok is false if
// there is none.
func (r *repState) take() (p *peer, env [][]byte, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.pending {
		return nil, nil, false
	}
	p, env = r.peer, r.env
	r.pending, r.peer, r.env = false, nil, nil
	return p, env, true
}

// restore gives back a request take returned whose reply was not sent,
// unless another request is owed a reply already.
func (r *repState) restore(p *peer, env [][]byte) {
	r.mu.Lock()
	if !r.pending {
		r.pending, r.peer, r.env = true, p, env
	}
	r.mu.Unlock()
}

func (s *Socket) sendRep(ctx context.Context, m Msg) error {
	p, env, ok := s.rep.take()
	if !ok {
		return fmt.Errorf("%w: REP must receive a request before replying", ErrState)
	}
	frames := make([][]byte, 0, len(env)+len(m.Frames))
	frames = append(frames, env...)
	frames = append(frames, m.Frames...)
	err := s.sendTo(ctx, p, Msg{Frames: frames})
	if err != nil {
		// Not sent (a timeout, say): the request is still owed a reply,
		// so Send may be retried.
		s.rep.restore(p, env)
	}
	return err
}

func (s *Socket) recvRep(ctx context.Context) (inMsg, error) {
	if s.rep.isPending() {
		return inMsg{}, fmt.Errorf("%w: REP must send the reply before receiving again", ErrState)
	}
	ctx, cancel := ctxFor(ctx, s.cfg.RecvTimeout)
	defer cancel()
	for {
		im, err := s.recvIn(ctx)
		if err != nil {
			return inMsg{}, err
		}
		f := im.m.Frames
		i := 0
		for i < len(f) && len(f[i]) != 0 {
			i++
		}
		if i == len(f) {
			s.st.dropped.Add(1)
			continue // no delimiter: not a request
		}
		s.rep.set(im.p, f[:i+1:i+1])
		im.m = Msg{Frames: f[i+1:]}
		return im, nil
	}
}
