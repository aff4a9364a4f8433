package group

import "encoding/binary"

// ackRangesLocked applies an OpAckRanges request: an ack of every offset
// of its ranges, refused per offset as OpAck's entries are.
func (s *Server) ackRangesLocked(g *state, req Request) *Reply {
	var refused []byte
	n, nref := uint32(0), uint32(0)
	for _, r := range req.Ranges {
		for i := uint64(0); i < uint64(r.Count); i++ {
			o := r.Offset + i
			n++
			p := g.pend[o]
			if p == nil || p.member != req.Member || p.deliveries != r.Delivery {
				code := RefusedNotLeased
				if p == nil {
					code = RefusedUnknown
				}
				refused = append(binary.BigEndian.AppendUint64(refused, o), code)
				nref++
				continue
			}
			g.cnt.Acked++
			g.settle(o)
		}
	}
	if nref > 0 {
		return &Reply{Status: StatusPartial, ID: req.ID, Count: nref, Data: refused}
	}
	return &Reply{Status: StatusOK, ID: req.ID, Count: n}
}
