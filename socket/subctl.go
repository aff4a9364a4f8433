package socket

import (
	"sync"

	"github.com/fastmq/fastmq/internal/zmtp"
)

// subCtl carries a SUB or XSUB socket's subscription changes to one
// peer's writer, apart from the data queue (peer.outq): recording a change
// never blocks, and a change is never lost to a full queue.
//
// Changes wait coalesced into a net count per topic (+1: SUBSCRIBE, -1:
// CANCEL, 0: nothing), so however long a peer stops reading, what waits
// for it is bounded by the number of distinct topics. Coalescing is sound
// because the changes are those of whether we hold the topic (see
// changeSubs), which alternate: after the writer has sent the net change,
// the peer holds the topic exactly when we do.
type subCtl struct {
	mu      sync.Mutex
	pending map[string]int // guarded by mu: topic -> net count not yet written
	note    chan struct{}  // cap 1: pending changed

	// Writer only.
	spare map[string]int // the map last written out, cleared, for reuse
	buf   []byte         // scratch for encoding one change
}

// init prepares c for use; it must run before the peer is published.
func (c *subCtl) init() { c.note = make(chan struct{}, 1) }

// change records delta SUBSCRIBEs (CANCELs if negative) of topic and
// wakes the writer. It never blocks for long: the lock is only held to
// update or swap the map.
func (c *subCtl) change(topic string, delta int) {
	c.mu.Lock()
	if c.pending == nil {
		c.pending = make(map[string]int)
	}
	if n := c.pending[topic] + delta; n != 0 {
		c.pending[topic] = n
	} else {
		delete(c.pending, topic)
	}
	c.mu.Unlock()
	select {
	case c.note <- struct{}{}:
	default:
	}
}

// size returns how many topics have changes waiting.
func (c *subCtl) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// take hands the waiting changes to the writer, leaving an empty map in
// their place (writer only). Give the map back with done.
func (c *subCtl) take() map[string]int {
	c.mu.Lock()
	m := c.pending
	c.pending, c.spare = c.spare, nil
	c.mu.Unlock()
	return m
}

// done recycles a map take returned (writer only).
func (c *subCtl) done(m map[string]int) {
	clear(m)
	c.spare = m
	if cap(c.buf) > 64<<10 {
		c.buf = nil // do not keep a huge topic's buffer
	}
}

// writeSubs writes the subscription changes waiting for the peer: as
// SUBSCRIBE/CANCEL commands to a ZMTP 3.1 peer, as \x01topic/\x00topic
// messages to a ZMTP 3.0 one (writer only; the caller flushes).
func (p *peer) writeSubs() error {
	c := &p.subctl
	m := c.take()
	defer c.done(m)
	for topic, n := range m {
		add := n > 0
		if !add {
			n = -n
		}
		for range n {
			var err error
			if p.minor >= 1 {
				name := zmtp.CmdCancel
				if add {
					name = zmtp.CmdSubscribe
				}
				c.buf = append(c.buf[:0], topic...)
				err = p.w.WriteCommand(name, c.buf)
			} else {
				c.buf = append(c.buf[:0], 0)
				if add {
					c.buf[0] = 1
				}
				c.buf = append(c.buf, topic...)
				err = p.w.WriteFrame(0, c.buf)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// changeSubs applies one subscription change (Subscribe, Unsubscribe, or
// a subscription message sent on an XSUB) to our subscriptions and
// records it for every peer; s.mu is held. A peer added before the change
// gets it here, one added after gets it with the rest of its replay
// (addPeer, under s.mu too): never both.
//
// Peers hear only of a prefix's first Subscribe and of the Unsubscribe
// that removes its last one. libzmq's SUB and XSUB send CANCEL that way;
// they repeat SUBSCRIBE, which we do not, as a libzmq PUB keeps one
// subscription per prefix and peer anyway (only a ZMQ_XPUB_VERBOSE
// publisher would see the repeats). A CANCEL while we still hold the
// prefix would stop what we still want. Our own PUB also holds a prefix
// once per peer.
func (s *Socket) changeSubs(add bool, prefix []byte) {
	delta := 1
	if add {
		if isNew, _ := s.subs.add(prefix, 0); !isNew {
			return
		}
	} else {
		if _, gone := s.subs.remove(prefix); !gone {
			return
		}
		delta = -1
	}
	key := string(prefix) // shared by every peer's pending map
	for _, p := range *s.peers.Load() {
		p.subctl.change(key, delta)
	}
}

// replaySubs records our subscriptions, one SUBSCRIBE per prefix, as the
// first changes a new peer gets (SUB/XSUB); s.mu is held.
func (s *Socket) replaySubs(p *peer) {
	p.subctl.init()
	s.subs.each(func(topic string, _ int) {
		p.subctl.change(topic, 1)
	})
}
