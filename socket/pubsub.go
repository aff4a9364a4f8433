package socket

import (
	"context"
	"fmt"
	"sync"
)

// pubState is what PUB and XPUB keep beyond each peer's subscriptions
// (peer.subs, changed by the peer's reader).
type pubState struct {
	// noDrop makes checking for room and queueing one step for PubNoDrop
	// sends (see sendFanoutNoDrop).
	noDrop sync.Mutex

	mu    sync.Mutex // guards xsubs
	xsubs subSet     // XPUB: union of peers' subscriptions

	// changed is closed and replaced whenever a peer's subscriptions
	// change or a peer leaves, to wake WaitSubscribers.
	chMu    sync.Mutex
	changed chan struct{}
}

// subsChanged returns the channel the next subscription change closes.
func (ps *pubState) subsChanged() <-chan struct{} {
	ps.chMu.Lock()
	defer ps.chMu.Unlock()
	if ps.changed == nil {
		ps.changed = make(chan struct{})
	}
	return ps.changed
}

// notifySubs wakes whoever waits on subsChanged.
func (ps *pubState) notifySubs() {
	ps.chMu.Lock()
	if ps.changed != nil {
		close(ps.changed)
		ps.changed = nil
	}
	ps.chMu.Unlock()
}

// WaitSubscribers blocks until at least n connected peers of a PUB or XPUB
// socket are subscribed to topic (a message starting with topic would
// reach them; a nil topic counts peers with any subscription), or until
// ctx ends. It answers ZeroMQ's slow-joiner problem: a connected SUB has
// not subscribed yet, and what a PUB sends before then is lost to it.
// Other socket kinds get ErrNotSupported.
func (s *Socket) WaitSubscribers(ctx context.Context, n int, topic []byte) error {
	if s.kind != Pub && s.kind != XPub {
		return fmt.Errorf("%w: WaitSubscribers on %s", ErrNotSupported, s.kind)
	}
	for {
		ch := s.pub.subsChanged()
		if s.closed.Load() {
			return ErrClosed
		}
		got := 0
		for _, p := range *s.peers.Load() {
			if (topic == nil && p.subs.len() > 0) || (topic != nil && p.subs.match(topic)) {
				got++
			}
		}
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: %d of %d subscribers: %w", ErrTimeout, got, n, ctx.Err())
		case <-s.closing:
			return ErrClosed
		}
	}
}

// maxPeerSubs bounds the distinct subscriptions one peer may hold, and
// maxPeerSubBytes their total size (each counts its length plus
// subOverhead), so a flood of SUBSCRIBEs, many or large, cannot cost
// unbounded memory.
const (
	maxPeerSubs     = 4096
	maxPeerSubBytes = 4 << 20
	subOverhead     = 64
)

// errTooManySubs disconnects a peer past maxPeerSubs or maxPeerSubBytes.
var errTooManySubs = fmt.Errorf("socket: peer holds more than %d subscriptions or %d bytes of them", maxPeerSubs, maxPeerSubBytes)

// subscription applies a peer's SUBSCRIBE or CANCEL (PUB/XPUB). As in
// libzmq, a peer holds a prefix at most once: a repeated SUBSCRIBE changes
// nothing and one CANCEL removes the prefix (libzmq's SUB sends SUBSCRIBE
// for every Subscribe, but CANCEL only for the last Unsubscribe).
func (p *peer) subscription(add bool, topic []byte) error {
	var changed, ok bool
	n := int64(len(topic) + subOverhead)
	if add {
		if changed, ok = p.subs.addOnce(topic, maxPeerSubs); !ok {
			return errTooManySubs
		}
		if changed {
			if p.subBytes+n > maxPeerSubBytes {
				p.subs.remove(topic)
				return errTooManySubs
			}
			p.subBytes += n
		}
	} else if _, changed = p.subs.remove(topic); changed {
		p.subBytes -= n
	}
	if p.s.kind == XPub && changed {
		p.s.xpubUpdate(p, topic, add, false)
	}
	if changed {
		p.s.pub.notifySubs()
	}
	return nil
}

// xpubUpdate keeps the union of subscriptions and passes a change of the
// union to Recv as a \x01topic or \x00topic message.
func (s *Socket) xpubUpdate(p *peer, topic []byte, add, leaving bool) {
	s.pub.mu.Lock()
	var changed bool
	if add {
		changed = s.pub.xsubs.add(topic)
	} else {
		_, changed = s.pub.xsubs.remove(topic)
	}
	s.pub.mu.Unlock()
	if !changed || s.closed.Load() {
		return
	}
	m := subMsg(add, topic)
	if leaving {
		s.pushLeft(inMsg{m: m, at: clock()})
		return
	}
	p.deliver(m)
}

// sendFanout queues m for every matching peer, dropping for full ones.
func (s *Socket) sendFanout(m Msg, filter bool) {
	n := msgBytes(m)
	for _, p := range *s.peers.Load() {
		if filter && !p.subs.match(m.Frames[0]) {
			continue
		}
		if !p.outq.pushDrop(m, n) {
			s.drop(p)
		}
	}
}

// sendFanoutNoDrop queues m for every matching peer once all of them have
// room (Config.PubNoDrop): until then nothing is queued, so a deadline
// leaves no peer with the message and the others without it. The check
// and the queueing happen together under s.pub.noDrop, which every such
// Send takes, so no other sender can take the room in between (writers
// only ever make room).
func (s *Socket) sendFanoutNoDrop(ctx context.Context, m Msg) error {
	var cancel context.CancelFunc = func() {}
	defer func() { cancel() }()
	bounded := false
	n := msgBytes(m)
	for {
		full := s.queueAllOrNone(m, n)
		if full == nil {
			return nil
		}
		if !bounded {
			ctx, cancel = ctxFor(ctx, s.cfg.SendTimeout)
			bounded = true
		}
		if err := full.outq.waitRoom(ctx, full.quit, s.closing, n); err != nil && err != errPeerGone {
			return err
		}
	}
}

// queueAllOrNone queues m, which counts n bytes, for every peer it
// matches if all of them have room, and returns nil; otherwise it queues
// nothing and returns a full peer.
func (s *Socket) queueAllOrNone(m Msg, n int64) *peer {
	s.pub.noDrop.Lock()
	defer s.pub.noDrop.Unlock()
	ps := *s.peers.Load()
	if len(ps) == 1 {
		if p := ps[0]; p.subs.match(m.Frames[0]) && !p.outq.push(m, n) {
			return p
		}
		return nil
	}
	for _, p := range ps {
		if !p.outq.hasRoom(n) && p.subs.match(m.Frames[0]) {
			return p
		}
	}
	for _, p := range ps {
		if p.subs.match(m.Frames[0]) && !p.outq.push(m, n) {
			// Cannot happen: only PubNoDrop sends queue here, and they
			// hold pub.noDrop. Count it rather than block under the lock.
			s.drop(p)
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

func subMsg(subscribe bool, topic []byte) Msg {
	b := make([]byte, 1+len(topic))
	if subscribe {
		b[0] = 1
	}
	copy(b[1:], topic)
	return Msg{Frames: [][]byte{b}}
}
