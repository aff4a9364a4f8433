package group

import (
	"cmp"
	"context"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/patterns/group/internal/wire"
)

// settleReq is what the settle goroutine takes from its queue: one
// settle of any op (a Message method's, in op and e), or a batch of
// records (recs: a Run goroutine's acks and naks without delay, or the
// buffer's lease extensions; they hold no pointer, so that the garbage
// collector need not scan them).
type settleReq struct {
	op   wire.Op
	e    wire.Entry
	recs []settleRec
	done func(error) // called once per settle, from the settle goroutine
	// lazy: no caller waits for the answer to go on (Run's settles);
	// sent with wire.FlagLazy when every settle of the request is lazy.
	lazy bool
}

// settleRec is one settle of a batch.
type settleRec struct {
	off uint64
	del uint32
	op  wire.Op // wire.OpAck, wire.OpNak (without delay) or wire.OpProgress
}

// maxBatch caps the entries of one settle request (the spool server's
// socket takes requests of up to 4 KiB).
const maxBatch = 128

// settle queues one entry and waits for the publisher's answer.
func (ln *link) settle(ctx context.Context, op wire.Op, e wire.Entry) error {
	ch := make(chan error, 1)
	if err := ln.settleAsync(ctx, op, e, func(err error) { ch <- err }); err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// settleAsync queues one entry; done gets the publisher's answer (or
// ErrClosed when the link stops first). It blocks only while the queue
// is full.
func (ln *link) settleAsync(ctx context.Context, op wire.Op, e wire.Entry, done func(error)) error {
	return ln.queueSettle(ctx, settleReq{op: op, e: e, done: done})
}

// queueSettle queues s, as settleAsync does.
func (ln *link) queueSettle(ctx context.Context, s settleReq) error {
	if ln.ctx.Err() != nil {
		return ErrClosed
	}
	select { // fast path: one channel locked, not three
	case ln.settles <- s:
		return nil
	default:
	}
	select {
	case ln.settles <- s:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-ln.ctx.Done():
		return ErrClosed
	}
}

// count returns how many settles s holds.
func (s *settleReq) count() int {
	if s.recs != nil {
		return len(s.recs)
	}
	return 1
}

// fail ends every settle of s with err.
func (s *settleReq) fail(err error) {
	for range s.count() {
		s.done(err)
	}
}

// settleLoop sends queued settles in batches, one request per op: acks
// as ranges of consecutive offsets (wire.OpAckRanges), so one request carries
// thousands of them.
func (ln *link) settleLoop() {
	defer ln.wg.Done()
	st := &settler{ln: ln, inflight: make(chan struct{}, maxSettleCalls), answered: make(chan struct{}, 1)}
	defer st.calls.Wait()
	for {
		g := gatherPool.Get().(*gather)
		if !st.gather(g) {
			gatherPool.Put(g)
			ln.failSettles()
			return
		}
		byOp := g.split()
		keys := g.keys
		g.left.Store(1) // this loop's, until every request is started
		if len(keys) > 0 {
			g.sortKeys()
			for len(keys) > 0 {
				k := rangesPrefix(keys, maxRangesPerRequest)
				st.send(g, wire.OpAckRanges, g.reqs, keys[:k])
				keys = keys[k:]
			}
		}
		for op, list := range byOp {
			for len(list) > 0 {
				k := min(len(list), maxBatch)
				st.send(g, op, list[:k], nil)
				list = list[k:]
			}
		}
		g.release()
	}
}

// settler is a settle loop's requests in flight.
type settler struct {
	ln       *link
	inflight chan struct{} // lazy requests in flight
	answered chan struct{} // a request in flight was answered
	calls    sync.WaitGroup
}

// gather takes the next batch of queued settles into g: it waits for
// one, then takes what is queued, up to maxGather. It reports false
// once the link stops.
func (st *settler) gather(g *gather) bool {
	ln := st.ln
	select {
	case s := <-ln.settles:
		g.add(s)
	case <-ln.ctx.Done():
		return false
	}
	for g.n < maxGather {
		select {
		case s := <-ln.settles:
			g.add(s)
			continue
		default:
		}
		// Few lazy settles while requests are in flight: wait for
		// one to be answered (or for enough to fill a request), and
		// take what came meanwhile; the answer comes with the
		// publisher's next group commit, which the next request
		// would wait for anyway. A settle a caller waits for goes
		// at once: the publisher commits it without delay.
		if g.n >= minGather || len(st.inflight) == 0 || g.urgent {
			break
		}
		select {
		case s := <-ln.settles:
			g.add(s)
		case <-st.answered:
			return true
		case <-ln.ctx.Done():
			return true
		}
	}
	return true
}

// failSettles ends every queued settle with ErrClosed.
func (ln *link) failSettles() {
	for {
		select {
		case s := <-ln.settles:
			s.fail(ErrClosed)
		default:
			return
		}
	}
}

// send sends one request of g's on a goroutine of its own: op for part,
// or for the acks keys index in part. Up to maxSettleCalls lazy requests
// are in flight, so that the publisher's next group commit takes the
// next batch. One a caller waits for takes no slot: the lazy ones in
// flight may each be held LazyCommit at the publisher.
func (st *settler) send(g *gather, op wire.Op, part []settleReq, keys []ackKey) {
	lazy := allLazy(part, keys)
	if lazy {
		st.inflight <- struct{}{}
	}
	st.calls.Add(1)
	g.left.Add(1)
	go func() {
		defer st.calls.Done()
		st.ln.sendSettles(op, part, keys, lazy)
		g.release()
		if lazy {
			<-st.inflight
		}
		select {
		case st.answered <- struct{}{}:
		default:
		}
	}()
}

// split sorts g's settles: the acks into g.keys, small keys that index
// into g.reqs (sorting the requests themselves moves their callbacks:
// write barriers), the other settles by op.
func (g *gather) split() map[wire.Op][]settleReq {
	var byOp map[wire.Op][]settleReq
	other := func(s settleReq) {
		if byOp == nil {
			byOp = map[wire.Op][]settleReq{}
		}
		byOp[s.op] = append(byOp[s.op], s)
	}
	for i, s := range g.reqs {
		if s.recs == nil {
			if s.op == wire.OpAck {
				g.keys = append(g.keys, ackKey{s.e.Offset, s.e.Delivery, uint32(i)})
			} else {
				other(s)
			}
			continue
		}
		for _, r := range s.recs {
			if r.op == wire.OpAck {
				g.keys = append(g.keys, ackKey{r.off, r.del, uint32(i)})
			} else {
				other(settleReq{op: r.op, e: wire.Entry{Offset: r.off, Delivery: r.del}, done: s.done, lazy: s.lazy})
			}
		}
	}
	return byOp
}

// gather is one round of the settle loop: the settles it took from the
// queue and their acks' keys. Gathers are reused (gatherPool) once their
// requests are answered: the keys of thousands of acks would otherwise
// be a large allocation per round.
type gather struct {
	reqs   []settleReq
	keys   []ackKey
	slots  []int32      // sortKeys' scratch: a key's index by its offset
	sorted []ackKey     // sortKeys' scratch
	n      int          // settles in reqs
	urgent bool         // one of reqs is not lazy
	left   atomic.Int32 // requests not answered, plus one while sending
}

// add takes s into the gather.
func (g *gather) add(s settleReq) {
	g.reqs = append(g.reqs, s)
	g.n += s.count()
	g.urgent = g.urgent || !s.lazy
}

var gatherPool = sync.Pool{New: func() any { return new(gather) }}

// release ends one request (or the sending) of g; the last puts g back
// in the pool, emptied.
func (g *gather) release() {
	if g.left.Add(-1) != 0 {
		return
	}
	clear(g.reqs)
	g.reqs, g.keys, g.n, g.urgent = g.reqs[:0], g.keys[:0], 0, false
	gatherPool.Put(g)
}

// ackKey is an ack's sort key: offset, delivery and the index of its
// settleReq in the gather.
type ackKey struct {
	off uint64
	del uint32
	i   uint32
}

func cmpAckKey(a, b ackKey) int { return cmp.Compare(a.off, b.off) }

// sortKeys sorts g.keys by offset. Acks come nearly in order, and from
// a few leased ranges (handlers running at once finish a little out of
// order): when their offsets span at most spanFactor times their count,
// each is put in its place by its offset in one pass, where a
// comparison sort cost a member 8 % of its CPU. With two acks of one
// offset (two deliveries), or offsets far apart, it sorts.
func (g *gather) sortKeys() {
	keys := g.keys
	if len(keys) < 2 || slices.IsSortedFunc(keys, cmpAckKey) {
		return
	}
	lo, hi := keys[0].off, keys[0].off
	for _, k := range keys[1:] {
		lo, hi = min(lo, k.off), max(hi, k.off)
	}
	if hi-lo >= uint64(spanFactor*len(keys)) { // hi-lo+1 could wrap
		slices.SortFunc(keys, cmpAckKey)
		return
	}
	span := hi - lo + 1
	slots := slices.Grow(g.slots[:0], int(span))[:span]
	for i := range slots {
		slots[i] = -1
	}
	g.slots = slots
	for i, k := range keys {
		j := k.off - lo
		if slots[j] >= 0 {
			slices.SortFunc(keys, cmpAckKey)
			return
		}
		slots[j] = int32(i)
	}
	sorted := g.sorted[:0]
	for _, i := range slots {
		if i >= 0 {
			sorted = append(sorted, keys[i])
		}
	}
	copy(keys, sorted)
	g.sorted = sorted[:0]
}

// spanFactor bounds the offsets' span, as a multiple of their count,
// that sortKeys places by offset.
const spanFactor = 4

// rangesPrefix returns how many of the sorted acks fit in n ranges (and
// wire.MaxRangeAcks acks).
func rangesPrefix(keys []ackKey, n int) int {
	runs := 0
	for i, k := range keys {
		if i == wire.MaxRangeAcks {
			return i
		}
		if i == 0 || k.off != keys[i-1].off+1 || k.del != keys[i-1].del {
			if runs == n {
				return i
			}
			runs++
		}
	}
	return len(keys)
}

// Settle batching: a batch gathers up to maxGather queued settles, and
// at least minGather before it is sent while requests are in flight; an
// wire.OpAckRanges request carries at most maxRangesPerRequest ranges (the
// spool server takes requests of up to 4 KiB).
const (
	maxSettleCalls      = 4
	maxGather           = 8192
	minGather           = 2048 // sent at once, even with requests in flight
	maxRangesPerRequest = 180
)

// sendSettles sends one request: for wire.OpAckRanges, the acks keys index
// in list (sorted), for other ops all of list; lazy ones (every settle
// lazy) with wire.FlagLazy.
func (ln *link) sendSettles(op wire.Op, list []settleReq, keys []ackKey, lazy bool) {
	req := &wire.Request{Op: op}
	if lazy {
		req.Flags = wire.FlagLazy
	}
	if op == wire.OpAckRanges {
		for i, k := range keys {
			if n := len(req.Ranges); i > 0 && k.off == keys[i-1].off+1 && k.del == req.Ranges[n-1].Delivery {
				req.Ranges[n-1].Count++
				continue
			}
			req.Ranges = append(req.Ranges, wire.Range{Offset: k.off, Count: 1, Delivery: k.del})
		}
	} else {
		req.Entries = make([]wire.Entry, len(list))
		for i, s := range list {
			req.Entries[i] = s.e
		}
	}
	rep, err := ln.call(ln.ctx, req, 10*time.Second)
	var refused map[uint64]uint8
	if err == nil && rep.Status == wire.StatusPartial {
		refused = make(map[uint64]uint8, rep.Count)
		for i := 0; i+9 <= len(rep.Data); i += 9 {
			refused[binary.BigEndian.Uint64(rep.Data[i:])] = rep.Data[i+8]
		}
	}
	answer := func(off uint64, done func(error)) {
		e := err
		if code, ok := refused[off]; ok && e == nil {
			e = &RefusedError{Offset: off, Code: code}
		}
		done(e)
	}
	if keys != nil {
		for _, k := range keys {
			answer(k.off, list[k.i].done)
		}
		return
	}
	for i := range list {
		answer(list[i].e.Offset, list[i].done)
	}
}

// allLazy reports whether every settle a request carries is lazy: for
// wire.OpAckRanges those of list that keys index, else all of list.
func allLazy(list []settleReq, keys []ackKey) bool {
	if keys != nil {
		for _, k := range keys {
			if !list[k.i].lazy {
				return false
			}
		}
		return true
	}
	for i := range list {
		if !list[i].lazy {
			return false
		}
	}
	return true
}
