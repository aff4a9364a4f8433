package group

import (
	"time"

	"github.com/fastmq/fastmq/patterns/group/internal/wire"
)

// Leases of buffered records. A publisher starts a lease when it sends
// the record, and the member may hold it in its buffer
// (MemberConfig.Buffer) a while before Next hands it out. So that a
// record cannot run out its lease there, unprocessed, and so that its
// handler has (nearly) its AckWait from when it takes it, keepLeases
// looks at the buffered records every AckWait/32 and extends the leases
// (as InProgress does) of those whose lease started AckWait/16 ago or
// more: a record handed out has at least 29/32 of AckWait left (of an
// AckWait of 160 ms or more; the looks are 5 ms apart at least). A record
// handed out promptly, the common case, costs nothing on the wire; a
// record that waits costs an entry in a batched request every AckWait/16.
// The extensions count towards MaxLeaseFactor as InProgress does: a
// record held in a buffer for ten AckWaits (its member's handlers stuck)
// runs out and goes to another member.

// keepEvery is how often keepLeases looks, for an AckWait: AckWait/32,
// and no more often than every 5 ms.
func keepEvery(ackWait time.Duration) time.Duration {
	return max(ackWait/32, 5*time.Millisecond)
}

// noAnswer takes the answer to an extension: a refusal means the record
// was settled meanwhile (or its link stopped), which is no matter here.
func noAnswer(error) {}

// keepLeases extends the leases of buffered records until the member
// closes.
func (m *Member) keepLeases() {
	defer m.wg.Done()
	every := keepEvery(m.cfg.AckWait)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		m.extendBuffered(time.Now(), 2*every)
	}
}

// extendBuffered extends the leases of the buffered records whose leases
// started age or more before now, one request per link.
func (m *Member) extendBuffered(now time.Time, age time.Duration) {
	ns := now.UnixNano()
	old := ns - int64(age)
	var byLink map[*link][]settleRec
	m.qmu.Lock()
	kept := m.inbuf[:0]
	for _, c := range m.inbuf {
		if len(c.rest) == 0 || c.rest[0].ln.ctx.Err() != nil {
			continue // handed out, or its link stopped (the publisher releases its leases)
		}
		kept = append(kept, c)
		if c.at > old {
			continue
		}
		c.at = ns
		if byLink == nil {
			byLink = map[*link][]settleRec{}
		}
		ln := c.rest[0].ln
		for i := range c.rest {
			byLink[ln] = append(byLink[ln], settleRec{off: c.rest[i].Offset, del: c.rest[i].Delivery, op: wire.OpProgress})
		}
	}
	clear(m.inbuf[len(kept):])
	m.inbuf = kept
	m.qmu.Unlock()
	for ln, recs := range byLink {
		for len(recs) > 0 {
			k := min(len(recs), maxGather)
			// Waits at most for the member's life: a full settle queue
			// is a link busy with acks.
			_ = ln.queueSettle(m.ctx, settleReq{recs: recs[:k], done: noAnswer})
			recs = recs[k:]
		}
	}
}
