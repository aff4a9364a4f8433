package socket

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"
)

// Send queues m for delivery according to the socket kind and takes
// ownership of its frames. It blocks while the kind's high-water-mark
// policy says so, until ctx ends or, if ctx has no deadline,
// Config.SendTimeout passes:
//
//   - PUSH, DEALER, REQ, PAIR: round-robin among connected peers whose
//     queue has room; block while there is none (also while there are no
//     peers).
//   - PUB, XPUB: to every peer whose subscriptions match the first frame;
//     a peer whose queue is full misses the message (counted in
//     Stats.Dropped, reported by a rate-limited EventDropped). Never
//     blocks, unless Config.PubNoDrop is set: then Send waits until every
//     matching peer has room and queues the message for all of them.
//   - ROUTER: Frames[0] names the destination peer. Unknown peers and full
//     queues drop the message, unless Config.RouterMandatory is set: then
//     unknown peers give ErrUnknownPeer and full queues block.
//   - REP: the reply goes back to the peer of the last request, with its
//     envelope restored.
//   - XSUB: \x01topic and \x00topic messages are subscription changes,
//     handled like Subscribe and Unsubscribe. Other messages go to every
//     peer; a peer whose queue is full misses the message (counted in
//     Stats.Dropped, reported by a rate-limited EventDropped), as with
//     libzmq's XSUB. Never blocks.
//   - SUB, PULL: ErrNotSupported.
//
// A deadline gives an error matching both ErrTimeout and
// context.DeadlineExceeded; cancellation gives context.Canceled.
// Returning nil means queued, not delivered.
func (s *Socket) Send(ctx context.Context, m Msg) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if len(m.Frames) == 0 {
		return fmt.Errorf("socket: send: message has no frames")
	}
	var err error
	switch s.kind {
	case Push, Dealer, Pair:
		_, err = s.sendRR(ctx, m)
	case Pub, XPub:
		if s.cfg.PubNoDrop {
			err = s.sendFanoutNoDrop(ctx, m)
		} else {
			s.sendFanout(m, true)
		}
	case XSub:
		err = s.sendXSub(m)
	case Router:
		err = s.sendRouter(ctx, m)
	case Req:
		err = s.sendReq(ctx, m)
	case Rep:
		err = s.sendRep(ctx, m)
	default:
		return fmt.Errorf("%w: Send on %s", ErrNotSupported, s.kind)
	}
	if err == nil {
		s.st.sent.Add(1)
	}
	return err
}

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

// sendFanout queues m for every matching peer, dropping for full ones.
func (s *Socket) sendFanout(m Msg, filter bool) {
	for _, p := range *s.peers.Load() {
		if filter && !p.subs.match(m.Frames[0]) {
			continue
		}
		if !p.outq.push(m) {
			s.drop(p)
		}
	}
}

// sendFanoutNoDrop queues m for every matching peer once all of them have
// room (Config.PubNoDrop): until then nothing is queued, so a deadline
// leaves no peer with the message and the others without it. The check
// and the queueing happen together under s.noDropMu, which every such
// Send takes, so no other sender can take the room in between (writers
// only ever make room).
func (s *Socket) sendFanoutNoDrop(ctx context.Context, m Msg) error {
	var cancel context.CancelFunc = func() {}
	defer func() { cancel() }()
	bounded := false
	for {
		full := s.queueAllOrNone(m)
		if full == nil {
			return nil
		}
		if !bounded {
			ctx, cancel = ctxFor(ctx, s.cfg.SendTimeout)
			bounded = true
		}
		if err := full.outq.waitRoom(ctx, full.quit, s.closing); err != nil && err != errPeerGone {
			return err
		}
	}
}

// queueAllOrNone queues m for every peer it matches if all of them have
// room, and returns nil; otherwise it queues nothing and returns a full
// peer.
func (s *Socket) queueAllOrNone(m Msg) *peer {
	s.noDropMu.Lock()
	defer s.noDropMu.Unlock()
	ps := *s.peers.Load()
	if len(ps) == 1 {
		if p := ps[0]; p.subs.match(m.Frames[0]) && !p.outq.push(m) {
			return p
		}
		return nil
	}
	for _, p := range ps {
		if p.outq.len() >= p.outq.hwm && p.subs.match(m.Frames[0]) {
			return p
		}
	}
	for _, p := range ps {
		if p.subs.match(m.Frames[0]) && !p.outq.push(m) {
			// Cannot happen: only PubNoDrop sends queue here, and they
			// hold noDropMu. Count it rather than block under the lock.
			s.drop(p)
		}
	}
	return nil
}

// drop counts a message a full peer missed and reports it, at most once a
// second per peer. The clock is read on the first drop and then on every
// 64th only: a publisher outrunning a subscriber drops at full speed, and
// reading the clock would cost more than the drop.
func (s *Socket) drop(p *peer) {
	s.st.dropped.Add(1)
	if p.drops.Add(1)%64 != 1 {
		return
	}
	now := time.Now().UnixNano()
	last := p.lastDrop.Load()
	if now-last >= int64(time.Second) && p.lastDrop.CompareAndSwap(last, now) {
		s.emit(Event{Type: EventDropped, Endpoint: p.endpoint, Peer: p.remote,
			Err: fmt.Errorf("socket: peer queue full (%d messages)", s.cfg.SendHWM)})
	}
}

// sendTo queues m for one peer, blocking while its queue is full. A peer
// that goes away swallows the message.
func (s *Socket) sendTo(ctx context.Context, p *peer, m Msg) error {
	if p.outq.push(m) {
		return nil
	}
	ctx, cancel := ctxFor(ctx, s.cfg.SendTimeout)
	defer cancel()
	for !p.outq.push(m) {
		switch err := p.outq.waitRoom(ctx, p.quit, s.closing); err {
		case nil:
		case errPeerGone:
			s.st.dropped.Add(1)
			return nil
		default:
			return err
		}
	}
	return nil
}

// sendXSub sends a subscription message (\x01topic or \x00topic) as a
// subscription change, like Subscribe, and any other message to every
// peer, dropping it for a peer whose queue is full as PUB does (libzmq's
// XSUB drops likewise).
func (s *Socket) sendXSub(m Msg) error {
	if len(m.Frames) == 1 && len(m.Frames[0]) > 0 && m.Frames[0][0] <= 1 {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed.Load() {
			return ErrClosed
		}
		s.changeSubs(m.Frames[0][0] == 1, m.Frames[0][1:])
		return nil
	}
	s.sendFanout(m, false)
	return nil
}

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

// Subscribe adds a prefix subscription (SUB and XSUB only); the empty
// prefix matches everything. Subscriptions are announced to every peer,
// now and after each reconnect. Subscribing twice to a prefix needs two
// Unsubscribe calls to remove it. Peers hear only of the first Subscribe
// of a prefix and of the Unsubscribe that removes it: a libzmq PUB holds a
// prefix once per peer, so an earlier CANCEL would cut off what is still
// wanted. (libzmq's own SUB repeats SUBSCRIBE on every subscribe, which
// only a ZMQ_XPUB_VERBOSE publisher upstream would see.)
//
// Subscribe and Unsubscribe never block: changes reach each peer apart
// from its message queue and are never dropped. While a peer is slow to
// read, its pending changes are merged into one net count per prefix, so
// a stalled peer costs memory bounded by the number of distinct prefixes
// and delays no other peer.
func (s *Socket) Subscribe(prefix []byte) error { return s.subscribe(true, prefix) }

// Unsubscribe removes one Subscribe of prefix. Unsubscribing a prefix
// that is not subscribed does nothing and tells no peer.
func (s *Socket) Unsubscribe(prefix []byte) error { return s.subscribe(false, prefix) }

func (s *Socket) subscribe(add bool, prefix []byte) error {
	if s.kind != Sub && s.kind != XSub {
		return fmt.Errorf("%w: subscriptions on %s", ErrNotSupported, s.kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	s.changeSubs(add, prefix)
	return nil
}
