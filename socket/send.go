package socket

import (
	"context"
	"fmt"
	"time"
)

// Send queues m for delivery according to the socket kind and takes
// ownership of its frames. It blocks while the kind's high-water-mark
// policy says so, until ctx ends or, if ctx has no deadline,
// Config.SendTimeout passes. A peer's queue is full at Config.SendHWM
// messages or Config.SendHWMBytes bytes (a message bigger than that
// passes alone); on the kinds that drop, a message that would take the
// bytes queued for all peers past Config.SendHWMBytesTotal is dropped
// too.
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
			Err: fmt.Errorf("socket: peer queue full (%d messages or %d bytes) or SendHWMBytesTotal reached", s.cfg.SendHWM, s.cfg.SendHWMBytes)})
	}
}

// sendTo queues m for one peer, blocking while its queue is full. A peer
// that goes away swallows the message.
func (s *Socket) sendTo(ctx context.Context, p *peer, m Msg) error {
	n := msgBytes(m)
	if p.writeDirect(m, n) || p.outq.push(m, n) {
		return nil
	}
	ctx, cancel := ctxFor(ctx, s.cfg.SendTimeout)
	defer cancel()
	for !p.outq.push(m, n) {
		switch err := p.outq.waitRoom(ctx, p.quit, s.closing, n); err {
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
