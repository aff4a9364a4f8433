package group

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"time"
)

// settleReq is one queued settle of a record.
type settleReq struct {
	op   Op
	e    Entry
	done func(error) // called once, from the settle goroutine
}

// maxBatch caps the entries of one settle request (the spool server's
// socket takes requests of up to 4 KiB).
const maxBatch = 128

// settle queues one entry and waits for the publisher's answer.
func (ln *link) settle(ctx context.Context, op Op, e Entry) error {
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
func (ln *link) settleAsync(ctx context.Context, op Op, e Entry, done func(error)) error {
	if ln.ctx.Err() != nil {
		return ErrClosed
	}
	select { // fast path: one channel locked, not three
	case ln.settles <- settleReq{op, e, done}:
		return nil
	default:
	}
	select {
	case ln.settles <- settleReq{op, e, done}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-ln.ctx.Done():
		return ErrClosed
	}
}

// settleLoop sends queued settles in batches, one request per op: acks
// as ranges of consecutive offsets (OpAckRanges), so one request carries
// thousands of them.
func (ln *link) settleLoop() {
	defer ln.wg.Done()
	inflight := make(chan struct{}, maxSettleCalls)
	var calls sync.WaitGroup
	defer calls.Wait()
	for {
		var batch []settleReq
		select {
		case s := <-ln.settles:
			// One allocation for the batch: the acks' requests index
			// into it.
			batch = make([]settleReq, 1, min(1+len(ln.settles), maxGather))
			batch[0] = s
		case <-ln.ctx.Done():
			for {
				select {
				case s := <-ln.settles:
					s.done(ErrClosed)
				default:
					return
				}
			}
		}
	more:
		for len(batch) < maxGather {
			select {
			case s := <-ln.settles:
				batch = append(batch, s)
			default:
				break more
			}
		}
		// Sorted by small keys (sorting the requests themselves moves
		// their callbacks: write barriers), which index into batch.
		var keys []ackKey
		var byOp map[Op][]settleReq
		ranges := !ln.noRanges.Load()
		for i, s := range batch {
			if s.op == OpAck && ranges {
				if keys == nil {
					keys = make([]ackKey, 0, len(batch)-i)
				}
				keys = append(keys, ackKey{s.e.Offset, s.e.Delivery, uint32(i)})
				continue
			}
			if byOp == nil {
				byOp = map[Op][]settleReq{}
			}
			byOp[s.op] = append(byOp[s.op], s)
		}
		send := func(op Op, part []settleReq, keys []ackKey) {
			// Up to maxSettleCalls requests in flight, so that the
			// publisher's next group commit takes the next batch.
			inflight <- struct{}{}
			calls.Add(1)
			go func() {
				defer calls.Done()
				ln.sendSettles(op, part, keys)
				<-inflight
			}()
		}
		if len(keys) > 0 {
			if !slices.IsSortedFunc(keys, cmpAckKey) {
				slices.SortFunc(keys, cmpAckKey)
			}
			for len(keys) > 0 {
				k := rangesPrefix(keys, maxRangesPerRequest)
				send(OpAckRanges, batch, keys[:k])
				keys = keys[k:]
			}
		}
		for op, list := range byOp {
			for len(list) > 0 {
				k := min(len(list), maxBatch)
				send(op, list[:k], nil)
				list = list[k:]
			}
		}
	}
}

// ackKey is an ack's sort key: offset, delivery and its index in the
// batch.
type ackKey struct {
	off uint64
	del uint32
	i   uint32
}

func cmpAckKey(a, b ackKey) int { return cmp.Compare(a.off, b.off) }

// rangesPrefix returns how many of the sorted acks fit in n ranges (and
// maxRangeAcks acks).
func rangesPrefix(keys []ackKey, n int) int {
	runs := 0
	for i, k := range keys {
		if i == maxRangeAcks {
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

// Settle batching: a batch gathers up to maxGather queued settles; an
// OpAckRanges request carries at most maxRangesPerRequest ranges (the
// spool server takes requests of up to 4 KiB).
const (
	maxSettleCalls      = 4
	maxGather           = 8192
	maxRangesPerRequest = 180
)

// sendSettles sends one request: for OpAckRanges, the acks keys index
// in list (sorted), for other ops all of list.
func (ln *link) sendSettles(op Op, list []settleReq, keys []ackKey) {
	req := &Request{Op: op}
	if op == OpAckRanges {
		for i, k := range keys {
			if n := len(req.Ranges); i > 0 && k.off == keys[i-1].off+1 && k.del == req.Ranges[n-1].Delivery {
				req.Ranges[n-1].Count++
				continue
			}
			req.Ranges = append(req.Ranges, Range{Offset: k.off, Count: 1, Delivery: k.del})
		}
	} else {
		req.Entries = make([]Entry, len(list))
		for i, s := range list {
			req.Entries[i] = s.e
		}
	}
	rep, err := ln.call(ln.ctx, req, 10*time.Second)
	var se *StatusError
	if op == OpAckRanges && errors.As(err, &se) && se.Status == StatusBadRequest {
		// A publisher from before OpAckRanges: plain acks from now on.
		ln.noRanges.Store(true)
		part := make([]settleReq, len(keys))
		for i, k := range keys {
			part[i] = list[k.i]
		}
		for len(part) > 0 {
			k := min(len(part), maxBatch)
			ln.sendSettles(OpAck, part[:k], nil)
			part = part[k:]
		}
		return
	}
	var refused map[uint64]uint8
	if err == nil && rep.Status == StatusPartial {
		refused = make(map[uint64]uint8, rep.Count)
		for i := 0; i+9 <= len(rep.Data); i += 9 {
			refused[binary.BigEndian.Uint64(rep.Data[i:])] = rep.Data[i+8]
		}
	}
	answer := func(s *settleReq) {
		e := err
		if code, ok := refused[s.e.Offset]; ok && e == nil {
			e = &RefusedError{Offset: s.e.Offset, Code: code}
		}
		s.done(e)
	}
	if keys != nil {
		for _, k := range keys {
			answer(&list[k.i])
		}
		return
	}
	for i := range list {
		answer(&list[i])
	}
}
