package group

import (
	"encoding/binary"
	"time"

	"github.com/fastmq/fastmq/patterns/group/internal/durable"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
)

// ackRangesLocked applies an wire.OpAckRanges request: an ack of every offset
// of its ranges, refused per offset as wire.OpAck's entries are. The part of a
// range that falls in a lease run of the member's (see runs.go) is
// settled at once; the rest record by record.
func (s *Server) ackRangesLocked(g *state, req wire.Request) *wire.Reply {
	var refused []byte
	n, nref, acked := uint32(0), uint32(0), 0
	for _, r := range req.Ranges {
		n += r.Count
		o, end := r.Offset, r.Offset+uint64(r.Count)
		for o < end {
			if i := g.RunAt(o); i >= 0 {
				e := min(end, g.Runs[i].To)
				if k, ok := g.AckInRun(i, o, e, req.Member, r.Delivery); ok {
					g.cnt.Acked += uint64(k)
					acked += k
					g.Settled(o, e)
					o = e
					continue
				}
				for ; o < e; o++ {
					if code, ok := s.ackOneLocked(g, o, req.Member, r.Delivery); ok {
						acked++
					} else {
						refused = append(binary.BigEndian.AppendUint64(refused, o), code)
						nref++
					}
				}
				continue
			}
			// Settled in runs: the spans grow once per run of pending
			// entries acked, not once per record.
			run := o
			for ; o < end && (g.InRuns == 0 || g.RunAt(o) < 0); o++ {
				p := g.Pend[o]
				if p == nil || p.Member != req.Member || p.Deliveries != r.Delivery {
					g.Settled(run, o)
					run = o + 1
					code := wire.RefusedNotLeased
					if p == nil {
						code = wire.RefusedUnknown
					}
					refused = append(binary.BigEndian.AppendUint64(refused, o), code)
					nref++
					continue
				}
				g.cnt.Acked++
				g.SettleLeased(o, p)
				acked++
			}
			g.Settled(run, o)
		}
	}
	if acked > 0 {
		if g.Held[req.Member] -= acked; g.Held[req.Member] <= 0 {
			delete(g.Held, req.Member)
		}
	}
	if nref > 0 {
		return &wire.Reply{Status: wire.StatusPartial, ID: req.ID, Count: nref, Data: refused}
	}
	return &wire.Reply{Status: wire.StatusOK, ID: req.ID, Count: n}
}

// ackOneLocked acks o for member with delivery count d, whether o is a
// pending entry or in a run; otherwise it returns the refusal's code. The
// caller lowers the member's lease count.
func (s *Server) ackOneLocked(g *state, o uint64, member string, d uint32) (code uint8, ok bool) {
	if p := g.Pend[o]; p != nil {
		if p.Member != member || p.Deliveries != d {
			return wire.RefusedNotLeased, false
		}
		g.cnt.Acked++
		g.SettleLeased(o, p)
		g.Settled(o, o+1)
		return 0, true
	}
	i := g.RunAt(o)
	if i < 0 || g.Runs[i].Acked.Has(o) {
		return wire.RefusedUnknown, false
	}
	if _, ok := g.AckInRun(i, o, o+1, member, d); !ok {
		return wire.RefusedNotLeased, false
	}
	g.cnt.Acked++
	g.Settled(o, o+1)
	return 0, true
}

// settleLocked applies an ack, nak, progress, term or leave request.
func (s *Server) settleLocked(g *state, req wire.Request) *wire.Reply {
	now := time.Now()
	if req.Op == wire.OpLeave {
		forgetLocked(g, func(m string) bool { return m == req.Member })
		s.dropParkedLocked(g, func(m string) bool { return m == req.Member })
		n := s.releaseLocked(g, func(m string) bool { return m == req.Member }, now, true)
		return &wire.Reply{Status: wire.StatusOK, ID: req.ID, Count: uint32(n)}
	}
	if req.Op == wire.OpAckRanges {
		return s.ackRangesLocked(g, req)
	}
	var refused []byte
	nref := uint32(0)
	for _, e := range req.Entries {
		p := g.Pend[e.Offset]
		if p == nil && g.InRuns > 0 {
			// Leased in a run: settled record by record from here.
			g.BreakRunAt(e.Offset)
			p = g.Pend[e.Offset]
		}
		if p == nil || p.Member != req.Member || p.Deliveries != e.Delivery {
			code := wire.RefusedNotLeased
			if p == nil {
				code = wire.RefusedUnknown
			}
			refused = append(refused, byte(e.Offset>>56), byte(e.Offset>>48), byte(e.Offset>>40), byte(e.Offset>>32),
				byte(e.Offset>>24), byte(e.Offset>>16), byte(e.Offset>>8), byte(e.Offset), code)
			nref++
			continue
		}
		switch req.Op {
		case wire.OpAck:
			g.cnt.Acked++
			g.Settle(e.Offset)
		case wire.OpProgress:
			// Extended by AckWait, up to MaxLeaseFactor x AckWait from
			// the lease's start: a stuck member cannot hold a record
			// for ever.
			p.Deadline = now.Add(g.Set.AckWait)
			if limit := p.Leased.Add(MaxLeaseFactor * g.Set.AckWait); p.Deadline.After(limit) {
				p.Deadline = limit
			}
		case wire.OpNak:
			g.cnt.Naked++
			delay := e.Delay
			if delay <= 0 {
				delay = g.Set.Delay(p.Deliveries)
			}
			p.Note("nak", e.Reason, now)
			s.returnLocked(g, e.Offset, p, now.Add(delay), "max deliveries")
		case wire.OpTerm:
			reason := e.Reason
			if reason == "" {
				reason = "terminated"
			}
			p.Note("term", e.Reason, now)
			s.deadLocked(g, e.Offset, p, reason)
		}
	}
	if nref > 0 {
		return &wire.Reply{Status: wire.StatusPartial, ID: req.ID, Count: nref, Data: refused}
	}
	return &wire.Reply{Status: wire.StatusOK, ID: req.ID, Count: uint32(len(req.Entries))}
}

// returnLocked makes a leased record available again from notBefore, or
// dead-letters it when it was delivered MaxDeliver times.
func (s *Server) returnLocked(g *state, o uint64, p *durable.Pending, notBefore time.Time, reason string) {
	if g.Set.MaxDeliver > 0 && int(p.Deliveries) >= g.Set.MaxDeliver {
		s.deadLocked(g, o, p, reason)
		return
	}
	s.giveBackLocked(g, p, notBefore)
}

// giveBackLocked makes p, leased, available again from notBefore on.
func (s *Server) giveBackLocked(g *state, p *durable.Pending, notBefore time.Time) {
	g.Release(p.Member)
	p.Member, p.NotBefore = "", notBefore
	g.Avail++
	g.Dirty = true
	s.wakeAtLocked(notBefore)
}

func (s *Server) deadLocked(g *state, o uint64, p *durable.Pending, reason string) {
	g.cnt.DeadLetters++
	s.dlq = append(s.dlq, deadLetter{stream: g.Stream, group: g.Group, offset: o, deliveries: p.Deliveries, reason: reason, history: p.History})
	g.Settle(o)
	s.wakeFlusher()
}

// releaseLocked returns the leases of the members gone says so, at once.
// Those of a member gone without a word (failed, or its node left) count
// as deliveries that failed: at MaxDeliver the record is dead-lettered
// (it may be what brought its member down). Those a member gave back
// when it left (left) do not: the record goes to another member, even
// past MaxDeliver, as a lease that ran out or a nak would not.
func (s *Server) releaseLocked(g *state, gone func(member string) bool, now time.Time, left bool) int {
	n := 0
	g.BreakRunsWhere(gone)
	for o, p := range g.Pend {
		if p.Member != "" && gone(p.Member) {
			g.cnt.Released++
			if left {
				p.Note("member left", "", now)
				s.giveBackLocked(g, p, now)
			} else {
				p.Note("member gone", "", now)
				s.returnLocked(g, o, p, now, "member gone")
			}
			n++
		}
	}
	return n
}

// dropParkedLocked ends the parked fetches of members that are gone (with
// an empty reply, through the flusher): none may lease again.
func (s *Server) dropParkedLocked(g *state, gone func(member string) bool) {
	keep := g.parked[:0]
	for _, p := range g.parked {
		if gone(p.req.Member) {
			s.replies = append(s.replies, pendingReply{p.env, wire.EncodeReply(&wire.Reply{Status: wire.StatusOK, ID: p.req.ID})})
			continue
		}
		keep = append(keep, p)
	}
	for i := len(keep); i < len(g.parked); i++ {
		g.parked[i] = nil
	}
	g.parked = keep
}
