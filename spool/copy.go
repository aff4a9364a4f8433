package spool

// Copies: a log that holds another log's batches byte for byte.
//
// AppendBatches stores batches as another Log's ReadRaw returned them
// (still compressed, with their headers, offsets, times and record ids):
// a copy of a stream that pulls with the consumers' fetch path and
// appends what it fetched, without decoding or re-encoding it, holds the
// same batches at the same offsets, so any copy serves the same bytes.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrOffsetMismatch is returned by AppendBatches when the first batch does
// not start at the log's next offset: a copy that missed records, or
// received them twice. Nothing was stored.
var ErrOffsetMismatch = errors.New("spool: batches do not start at the next offset")

// rawAppend is an AppendBatches request.
type rawAppend struct {
	data    []byte // whole, checked batches
	base    uint64 // offset of the first
	records int
	err     error // refused by the writer (offsets); the Log goes on
}

// AppendBatches appends data, one or more whole batches as ReadRaw returns
// them from another Log, byte for byte. The first batch must start at
// base, and base must be the log's next offset (NextOffset, once every
// earlier append is written), else it fails with ErrOffsetMismatch; the
// batches must follow each other without a gap. Every batch is checked
// (header, CRC, decompression and record framing) before anything is
// stored: damaged data fails with an error matching ErrCorrupt and stores
// nothing, so a copy never keeps, serves or forwards damaged bytes. It
// returns the offset after the last record once the batches are durable
// as Config.Sync says, as Append does. Records appended this way are not
// checked for duplicates (Config.DedupWindow): the log they come from
// did. The caller may reuse data once it returns, also when ctx ended
// first (the batches may then still be stored: see NextOffset).
func (l *Log) AppendBatches(ctx context.Context, data []byte, base uint64) (uint64, error) {
	if l.readOnly {
		return 0, ErrReadOnly
	}
	records, err := checkBatches(data, base, l.cfg.MaxBatchBytes)
	if err != nil {
		return 0, err
	}
	if records == 0 {
		return base, nil
	}
	a := &Ack{now: time.Now().UnixNano(), done: make(chan struct{}), encoded: make(chan struct{}),
		raw: &rawAppend{data: data, base: base, records: records}}
	a.bytes = len(data)
	if err := l.send(ctx, a); err != nil {
		return 0, err
	}
	select {
	case <-a.done:
		if a.err != nil {
			return 0, a.err
		}
		return base + uint64(records), nil
	case <-ctx.Done():
		<-a.encoded // the writer no longer reads data: the caller may reuse it
		return 0, ctx.Err()
	}
}

// checkBatches checks that data is whole batches, contiguous from base,
// each valid, and returns how many records they hold.
func checkBatches(data []byte, base uint64, maxBatch int) (int, error) {
	records := 0
	next := base
	for pos := 0; pos < len(data); {
		v, n, err := openBatch(data[pos:], maxBatch, int64(pos), "copied batches", next)
		if err != nil {
			return 0, err
		}
		if v.h.Base != next {
			return 0, &CorruptError{Segment: "copied batches", Pos: int64(pos), Offset: next,
				Reason: fmt.Sprintf("batch starts at offset %d, want %d", v.h.Base, next)}
		}
		var r Record
		for {
			ok, err := v.next(&r, int64(pos), "copied batches")
			if err != nil {
				return 0, err
			}
			if !ok {
				break
			}
		}
		records += int(v.h.Count)
		next += uint64(v.h.Count)
		pos += n
	}
	return records, nil
}

// writeRawGroup writes one AppendBatches request as a group of its own and
// hands it to the syncer (writer goroutine).
func (l *Log) writeRawGroup(req *Ack) {
	pw := &pendingWrite{reqs: []*Ack{req}, records: int32(min(req.raw.records, 1<<30))}
	if err := l.failure(); err != nil {
		pw.err = err
	} else if err := l.reserve(req.raw.records, len(req.raw.data)); err != nil {
		pw.err = err
		l.refused(err, req.raw.records)
	} else if err := l.writeRaw(pw, req); err != nil {
		l.fail(err)
		pw.err = err
	} else if len(pw.chunks) > 0 {
		if l.cfg.VisibleBeforeSync {
			l.publishEarly(pw)
		} else {
			l.noteWritten(pw)
		}
	}
	req.raw.data = nil // written: the queued group holds no batches
	req.encodedDone()
	l.sq.put(pw)
}

// writeRaw writes the checked batches of req at the write position,
// rolling segments as writeGroup does. A request that does not start at
// the next offset is refused (req.raw.err) with nothing written; an error
// returned is a failed write, which fails the Log.
func (l *Log) writeRaw(pw *pendingWrite, req *Ack) error {
	ra := req.raw
	if ra.base != l.wnext {
		ra.err = fmt.Errorf("%w: they start at %d, the log's next offset is %d", ErrOffsetMismatch, ra.base, l.wnext)
		return nil
	}
	req.first = ra.base
	l.wbuf = l.wbuf[:0]
	chunk := segChunk{seg: l.active}
	for pos := 0; pos < len(ra.data); {
		h := parseBatchHeader(ra.data[pos:])
		b := ra.data[pos : pos+int(h.Len)]
		pos += len(b)
		// Roll before this batch if it would overflow a non-empty segment.
		if l.wpos+int64(len(l.wbuf)+len(b)) > l.cfg.SegmentBytes && l.wpos+int64(len(l.wbuf)) > segHeaderLen {
			if err := l.flush(len(l.wbuf)); err != nil {
				return err
			}
			chunk.endPos = l.wpos
			if len(chunk.batches) > 0 {
				pw.chunks = append(pw.chunks, chunk)
			}
			if err := l.roll(); err != nil {
				return err
			}
			chunk = segChunk{seg: l.active}
		}
		chunk.batches = append(chunk.batches, batchIdx{base: h.Base, pos: l.wpos + int64(len(l.wbuf)), size: h.Len,
			count: h.Count, minTs: h.MinTime, maxTs: h.MaxTime, codec: h.Codec})
		l.wbuf = append(l.wbuf, b...)
		l.wnext = h.Base + uint64(h.Count)
	}
	if err := l.flush(len(l.wbuf)); err != nil {
		return err
	}
	chunk.endPos = l.wpos
	if len(chunk.batches) > 0 {
		pw.chunks = append(pw.chunks, chunk)
	}
	return nil
}
