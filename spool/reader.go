package spool

import (
	"context"
	"sync"
	"sync/atomic"
)

const readChunk = 262144

// Reader reads records in offset order from a starting offset and follows
// the tail. A Reader is not safe for concurrent use; Close may be called from
// any goroutine and more than once. Next blocks at the tail.
type Reader struct {
	l      *Log
	next   uint64
	data   []byte
	dpos   int
	view   batchView
	in     bool
	closed atomic.Bool
	stop   chan struct{}
	once   sync.Once
	reuse  bool   // ReuseBuffer: read into buf, kept across reads
	buf    []byte // the read buffer, with reuse
	// written: ReadWritten, read up to WrittenOffset
	written bool
}

// NewReader returns a Reader whose first record is the one at offset from
// (or the first one after it, if from lies in a gap left by Repair).
// Reading below OldestOffset fails with *OutOfRangeError on the first Next.
func (l *Log) NewReader(from uint64) (*Reader, error) {
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	return &Reader{l: l, next: from, stop: make(chan struct{})}, nil
}

// Offset returns the offset of the record the next call to Next will return
// (at least; more if there is a gap).
func (r *Reader) Offset() uint64 { return r.next }

// Next returns the next record. At the tail it blocks until a record is
// appended, ctx ends (ctx.Err()) or the Log is closed (ErrClosed). The
// record's slices are owned by the caller and are not reused (unless
// ReuseBuffer was called). A record
// deleted by retention before it was read gives *OutOfRangeError. Damage
// gives a *CorruptError naming the segment, byte position and offset: a
// damaged batch as it is read, and, on a read-only Log, damage where the
// valid data ends (see Log.Damage) instead of waiting there.
func (r *Reader) Next(ctx context.Context) (Record, error) {
	for {
		if r.closed.Load() {
			return Record{}, ErrClosed
		}
		if r.in {
			var rec Record
			ok, err := r.view.next(&rec, 0, "")
			if err != nil {
				return Record{}, err
			}
			if ok {
				if rec.Offset < r.next {
					continue
				}
				r.next = rec.Offset + 1
				return rec, nil
			}
			r.in = false
			continue
		}
		if r.dpos < len(r.data) {
			v, n, err := openBatch(r.data[r.dpos:], r.l.cfg.MaxBatchBytes, int64(r.dpos), "", r.next)
			if err != nil {
				if ce, ok := err.(*CorruptError); ok {
					ce.Segment, ce.Pos, ce.Offset = r.l.locate(r.next)
				}
				return Record{}, err
			}
			r.dpos += n
			r.view, r.in = v, true
			continue
		}
		var buf []byte
		if r.reuse {
			buf = r.buf
		}
		var data []byte
		var err error
		if r.written {
			data, _, err = r.l.readWritten(buf, r.next, readChunk)
		} else {
			data, _, err = r.l.readRaw(buf, r.next, readChunk)
		}
		if err != nil {
			return Record{}, err
		}
		if r.reuse && cap(data) > cap(r.buf) {
			r.buf = data[:0]
		}
		if len(data) == 0 {
			wait := r.l.wait
			if r.written {
				wait = r.l.waitWritten
			}
			if err := wait(ctx, r.next, r.stop); err != nil {
				return Record{}, err
			}
			continue
		}
		r.data, r.dpos = data, 0
	}
}

// ReuseBuffer makes the Reader read the log into one buffer that it keeps
// and overwrites (up to 256 KiB, or one larger batch), instead of a new
// one per read: a record's slices (Value, header values) are then valid
// only until the next call to Next. For callers that copy what they keep
// of a record, such as a server encoding records into its replies; it
// saves an allocation and its garbage collection per read. Call it
// before Next.
func (r *Reader) ReuseBuffer() { r.reuse = true }

// Close ends the Reader: Next, even one blocked at the tail, returns
// ErrClosed. It never fails.
func (r *Reader) Close() error {
	r.closed.Store(true)
	r.once.Do(func() { close(r.stop) })
	return nil
}

// locate returns the segment name, byte position and base offset of the
// batch that holds offset, for error reports.
func (l *Log) locate(offset uint64) (string, int64, uint64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segs {
		if s.end > offset {
			for _, b := range s.batches {
				if b.end() > offset {
					return s.name, b.pos, b.base
				}
			}
		}
	}
	return "", 0, offset
}
