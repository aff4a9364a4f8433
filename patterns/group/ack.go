package group

import "encoding/binary"

// ackRangesLocked applies an OpAckRanges request: an ack of every offset
// of its ranges, refused per offset as OpAck's entries are.
func (s *Server) ackRangesLocked(g *state, req Request) *Reply {
	var refused []byte
	n, nref, acked := uint32(0), uint32(0), 0
	for _, r := range req.Ranges {
		// Settled in runs: the spans grow once per run, the member's
		// lease count once per request.
		run := r.Offset
		for i := uint64(0); i < uint64(r.Count); i++ {
			o := r.Offset + i
			n++
			p := g.pend[o]
			if p == nil || p.member != req.Member || p.deliveries != r.Delivery {
				g.settled(run, o)
				run = o + 1
				code := RefusedNotLeased
				if p == nil {
					code = RefusedUnknown
				}
				refused = append(binary.BigEndian.AppendUint64(refused, o), code)
				nref++
				continue
			}
			g.cnt.Acked++
			g.settleLeased(o, p)
			acked++
		}
		g.settled(run, r.Offset+uint64(r.Count))
	}
	if acked > 0 {
		if g.held[req.Member] -= acked; g.held[req.Member] <= 0 {
			delete(g.held, req.Member)
		}
	}
	if nref > 0 {
		return &Reply{Status: StatusPartial, ID: req.ID, Count: nref, Data: refused}
	}
	return &Reply{Status: StatusOK, ID: req.ID, Count: n}
}
