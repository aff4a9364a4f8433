package group

import (
	"encoding/binary"

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
			if i := g.runAt(o); i >= 0 {
				e := min(end, g.runs[i].to)
				if k, ok := g.ackInRun(i, o, e, req.Member, r.Delivery); ok {
					g.cnt.Acked += uint64(k)
					acked += k
					g.settled(o, e)
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
			for ; o < end && (g.inRuns == 0 || g.runAt(o) < 0); o++ {
				p := g.pend[o]
				if p == nil || p.member != req.Member || p.deliveries != r.Delivery {
					g.settled(run, o)
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
				g.settleLeased(o, p)
				acked++
			}
			g.settled(run, o)
		}
	}
	if acked > 0 {
		if g.held[req.Member] -= acked; g.held[req.Member] <= 0 {
			delete(g.held, req.Member)
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
	if p := g.pend[o]; p != nil {
		if p.member != member || p.deliveries != d {
			return wire.RefusedNotLeased, false
		}
		g.cnt.Acked++
		g.settleLeased(o, p)
		g.settled(o, o+1)
		return 0, true
	}
	i := g.runAt(o)
	if i < 0 || g.runs[i].acked.has(o) {
		return wire.RefusedUnknown, false
	}
	if _, ok := g.ackInRun(i, o, o+1, member, d); !ok {
		return wire.RefusedNotLeased, false
	}
	g.cnt.Acked++
	g.settled(o, o+1)
	return 0, true
}
