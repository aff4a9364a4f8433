package socket

import (
	"context"
	"encoding/binary"
	"fmt"
)

func (s *Socket) sendReq(ctx context.Context, m Msg) error {
	// The state is checked and committed under reqMu, but the lock is not
	// held while the send blocks: a concurrent Recv keeps its own ctx.
	s.reqMu.Lock()
	if (s.reqWaiting && !s.cfg.ReqRelaxed) || s.reqSending {
		s.reqMu.Unlock()
		return fmt.Errorf("%w: REQ must receive the reply before sending again", ErrState)
	}
	s.reqSending = true
	id := s.reqID + 1
	s.reqMu.Unlock()
	frames := make([][]byte, 0, len(m.Frames)+2)
	if s.cfg.ReqCorrelate {
		frames = append(frames, binary.BigEndian.AppendUint32(nil, id))
	}
	frames = append(frames, []byte{})
	frames = append(frames, m.Frames...)
	p, err := s.sendRR(ctx, Msg{Frames: frames})
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	s.reqSending = false
	if err != nil {
		return err
	}
	s.reqID = id
	s.reqPeer = p
	s.reqWaiting = true
	return nil
}

func (s *Socket) sendRep(ctx context.Context, m Msg) error {
	s.repMu.Lock()
	if !s.repPending {
		s.repMu.Unlock()
		return fmt.Errorf("%w: REP must receive a request before replying", ErrState)
	}
	p, env := s.repPeer, s.repEnv
	s.repPending, s.repPeer, s.repEnv = false, nil, nil
	s.repMu.Unlock()
	frames := make([][]byte, 0, len(env)+len(m.Frames))
	frames = append(frames, env...)
	frames = append(frames, m.Frames...)
	err := s.sendTo(ctx, p, Msg{Frames: frames})
	if err != nil {
		// Not sent (a timeout, say): the request is still owed a reply,
		// so Send may be retried.
		s.repMu.Lock()
		if !s.repPending {
			s.repPending, s.repPeer, s.repEnv = true, p, env
		}
		s.repMu.Unlock()
	}
	return err
}

func (s *Socket) recvReq(ctx context.Context) (Msg, error) {
	s.reqMu.Lock()
	if !s.reqWaiting {
		s.reqMu.Unlock()
		return Msg{}, fmt.Errorf("%w: REQ must send a request before receiving", ErrState)
	}
	s.reqMu.Unlock()
	ctx, cancel := ctxFor(ctx, s.cfg.RecvTimeout)
	defer cancel()
	for {
		im, err := s.recvIn(ctx)
		if err != nil {
			return Msg{}, err
		}
		s.reqMu.Lock()
		p, id, waiting := s.reqPeer, s.reqID, s.reqWaiting
		s.reqMu.Unlock()
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
		s.reqMu.Lock()
		if s.reqID != id {
			s.reqMu.Unlock()
			continue // a newer request was sent meanwhile
		}
		s.reqWaiting = false
		s.reqMu.Unlock()
		return Msg{Frames: f[1:]}, nil
	}
}

func (s *Socket) recvRep(ctx context.Context) (Msg, error) {
	s.repMu.Lock()
	pending := s.repPending
	s.repMu.Unlock()
	if pending {
		return Msg{}, fmt.Errorf("%w: REP must send the reply before receiving again", ErrState)
	}
	ctx, cancel := ctxFor(ctx, s.cfg.RecvTimeout)
	defer cancel()
	for {
		im, err := s.recvIn(ctx)
		if err != nil {
			return Msg{}, err
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
		s.repMu.Lock()
		s.repPending, s.repPeer, s.repEnv = true, im.p, f[:i+1:i+1]
		s.repMu.Unlock()
		return Msg{Frames: f[i+1:]}, nil
	}
}
