package spool

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
)

// Ack is the pending result of AppendAsync. Its methods are safe for
// concurrent use and may be called any number of times.
type Ack struct {
	recs    []Record
	bytes   int // the records' body sizes, summed by AppendAsync
	now     int64
	force   bool // Sync: fsync now
	first   uint64
	err     error
	encoded chan struct{} // closed once the writer no longer reads recs (Append's only; nil otherwise)
	done    chan struct{} // closed once first and err are set

	dd  *ackDedup  // deduplication (dedupwrite.go); nil for records without its headers
	raw *rawAppend // AppendBatches (copy.go); nil for records
}

// encodedDone says the writer no longer reads the records (see encoded).
func (a *Ack) encodedDone() {
	if a.encoded != nil {
		close(a.encoded)
	}
}

// Done is closed when the records are durable (per Config.Sync) or failed.
func (a *Ack) Done() <-chan struct{} { return a.done }

// Wait blocks until Done and returns the first offset, or returns ctx.Err()
// (the records may still be stored).
func (a *Ack) Wait(ctx context.Context) (uint64, error) {
	select {
	case <-a.done:
		return a.first, a.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Append appends records and returns the offset of the first; they get
// offsets first..first+len(recs)-1, in order, and no other Append's records
// come between them. Zero IDs and times are filled in (the time is the same
// for all records of one call). It returns when the records are durable as
// Config.Sync says: SyncEach and SyncGroup after the fsync that covers them,
// SyncNone once written to the operating system. Records become visible to
// readers at the same moment.
//
// Append does not keep recs after it returns. If ctx ends first, Append
// returns ctx.Err() and the records may or may not be stored. Appending no
// records returns NextOffset(). A record larger than Config.MaxRecordBytes
// fails the whole call with ErrTooLarge.
func (l *Log) Append(ctx context.Context, recs ...Record) (uint64, error) {
	if len(recs) == 0 {
		if l.readOnly {
			return 0, ErrReadOnly
		}
		return l.NextOffset(), nil
	}
	a, err := l.appendAsync(ctx, true, recs)
	if err != nil {
		return 0, err
	}
	select {
	case <-a.done:
		return a.first, a.err
	case <-ctx.Done():
		<-a.encoded // the writer no longer reads recs
		return 0, ctx.Err()
	}
}

// AppendAsync queues records like Append but returns as soon as they are
// queued (it blocks only while the queue is full, or until ctx ends: 256
// appends wait for the writer, which keeps writing while an fsync runs and
// itself waits only once 16384 written groups wait for theirs). The
// returned Ack completes when Append would have returned. The caller must
// not modify recs until then. It lets one goroutine keep several appends in
// flight, so that writing the next group overlaps the fsync of the last one.
func (l *Log) AppendAsync(ctx context.Context, recs ...Record) (*Ack, error) {
	return l.appendAsync(ctx, false, recs)
}

// appendAsync is AppendAsync; withEncoded gives the Ack the channel the
// writer closes once it no longer reads recs, which only Append's early
// return on ctx needs (an AppendAsync caller keeps recs until Done).
func (l *Log) appendAsync(ctx context.Context, withEncoded bool, recs []Record) (*Ack, error) {
	if l.readOnly {
		return nil, ErrReadOnly
	}
	size := 0
	var keys []dedupKey
	for i := range recs {
		if len(recs[i].Headers) > 0 {
			k, ok, err := parseDedup(&recs[i], i, l.cfg.DedupWindow < 0, l.cfg.MaxProducers < 0)
			if err != nil {
				return nil, fmt.Errorf("%w: record %d: %v", ErrInvalidRecord, i, err)
			}
			if ok {
				keys = append(keys, k)
			}
		}
		n := recordBodyLen(&recs[i], 1<<62)
		if n > l.cfg.MaxRecordBytes {
			return nil, fmt.Errorf("%w: record %d is %d bytes, limit %d", ErrTooLarge, i, n, l.cfg.MaxRecordBytes)
		}
		size += n
		// Times within a batch are stored as offsets of up to 2^62 ns from
		// its first; keeping every time in [1970, 2116) keeps any mix of
		// records in one batch decodable.
		if t := recs[i].Time; !t.IsZero() && (t.UnixNano() < 0 || t.UnixNano() >= 1<<62 || t.Before(minRecordTime)) {
			return nil, fmt.Errorf("%w: record %d has time %s, outside %s to %s", ErrInvalidRecord, i, t.UTC().Format(time.RFC3339), minRecordTime.Format(time.RFC3339), maxRecordTime.Format(time.RFC3339))
		}
	}
	a := &Ack{recs: recs, bytes: size, now: time.Now().UnixNano(), done: make(chan struct{})}
	if keys != nil {
		a.dd = &ackDedup{keys: keys}
	}
	if withEncoded {
		a.encoded = make(chan struct{})
	}
	if len(recs) == 0 {
		a.first = l.NextOffset()
		a.encodedDone()
		close(a.done)
		return a, nil
	}
	if err := l.send(ctx, a); err != nil {
		return nil, err
	}
	return a, nil
}

func (l *Log) send(ctx context.Context, req *Ack) error {
	l.closeMu.RLock()
	defer l.closeMu.RUnlock()
	if l.closing {
		return ErrClosed
	}
	if err := l.failure(); err != nil {
		return err
	}
	select {
	case l.reqCh <- req:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Sync fsyncs everything appended so far, whatever the policy.
func (l *Log) Sync() error {
	if l.readOnly {
		return ErrReadOnly
	}
	a := &Ack{force: true, encoded: make(chan struct{}), done: make(chan struct{})}
	if err := l.send(context.Background(), a); err != nil {
		return err
	}
	<-a.done
	return a.err
}

// writer owns the write position: it coalesces queued appends into batches,
// writes them and hands them to the syncer.
func (l *Log) writer() {
	defer l.wg.Done()
	defer l.sq.close()
	group := make([]*Ack, 0, 256)
	var held *Ack // taken while draining, for the next group
	for {
		req := held
		held = nil
		if req == nil {
			var ok bool
			if req, ok = <-l.reqCh; !ok {
				return
			}
		}
		if req.raw != nil {
			l.writeRawGroup(req)
			continue
		}
		group = append(group[:0], req)
		n := len(req.recs)
		size := req.bytes
	drain:
		// A group is bounded in records and in bytes, so the write buffer
		// that holds it stays bounded whatever the appenders send.
		for n < 1<<16 && size < maxGroupBytes {
			select {
			case r, ok := <-l.reqCh:
				if !ok {
					break drain
				}
				if r.raw != nil {
					held = r // copied batches are a group of their own
					break drain
				}
				group = append(group, r)
				n += len(r.recs)
				size += r.bytes
			default:
				break drain
			}
		}
		pw := &pendingWrite{reqs: append([]*Ack(nil), group...), records: int32(n)}
		if err := l.failure(); err != nil {
			pw.err = err
		} else if err := l.reserve(n, size); err != nil {
			pw.err = err // refused before anything was written: the log goes on
			l.refused(err, n)
		} else if err := l.writeGroup(pw); err != nil {
			l.fail(err)
			pw.err = err
		} else if l.cfg.VisibleBeforeSync {
			l.publishEarly(pw)
		} else {
			l.noteWritten(pw)
		}
		for _, r := range group {
			r.encodedDone()
			r.recs = nil // written: the queued group holds no record values
			pw.force = pw.force || r.force
		}
		l.sq.put(pw)
	}
}

// maxGroupBytes bounds the record bytes the writer gathers into one group
// (a single Append larger than this is still written whole).
const maxGroupBytes = 8 << 20

func (l *Log) newID() uuid.UUID {
	if l.idRand == nil {
		var seed [32]byte
		_, _ = rand.Read(seed[:]) // never fails (crypto/rand)
		l.idRand = mrand.NewChaCha8(seed)
	}
	var id uuid.UUID
	binary.LittleEndian.PutUint64(id[0:], l.idRand.Uint64())
	binary.LittleEndian.PutUint64(id[8:], l.idRand.Uint64())
	id[6] = (id[6] & 0x0f) | 0x40 // version 4
	id[8] = (id[8] & 0x3f) | 0x80 // RFC 4122 variant
	return id
}

// writeGroup encodes the records of pw.reqs into batches and writes them.
func (l *Log) writeGroup(pw *pendingWrite) error {
	l.wbuf = l.wbuf[:0]
	off := l.wnext
	for _, r := range pw.reqs {
		r.first = off
		if r.dd != nil {
			l.dedupAppend(r, off, pw)
			if r.dd.err != nil {
				r.first = r.dd.first
			}
		}
		off += uint64(len(r.recs))
	}
	chunk := segChunk{seg: l.active}
	ri, ki := 0, 0 // request and record cursor
	reqs := pw.reqs
	for ri < len(reqs) && len(reqs[ri].recs) == 0 {
		ri++
	}
	for ri < len(reqs) {
		// Pass 1: the extent of this batch and its time range.
		var minTs, maxTs int64 = math.MaxInt64, math.MinInt64
		rawLen, count := 0, 0
		er, ek := ri, ki
		for er < len(reqs) {
			r := &reqs[er].recs[ek]
			t := reqs[er].now
			if !r.Time.IsZero() {
				t = r.Time.UnixNano()
			}
			sz := recordBodyLen(r, 1<<62) + 10
			if count > 0 && rawLen+sz > l.cfg.MaxBatchBytes {
				break
			}
			rawLen += sz
			count++
			minTs, maxTs = min(minTs, t), max(maxTs, t)
			if ek++; ek == len(reqs[er].recs) {
				er, ek = er+1, 0
				for er < len(reqs) && len(reqs[er].recs) == 0 {
					er++
				}
			}
		}
		// Pass 2: encode.
		start := len(l.wbuf)
		l.wbuf = append(l.wbuf, make([]byte, batchHeaderLen)...)
		dst := l.wbuf
		if l.cfg.Codec != CodecNone {
			dst = l.raw[:0]
		}
		rawStart := len(dst)
		for i := 0; i < count; i++ {
			req := reqs[ri]
			r := &req.recs[ki]
			t := req.now
			if !r.Time.IsZero() {
				t = r.Time.UnixNano()
			}
			id := r.ID
			if id == (uuid.UUID{}) {
				id = l.newID()
			}
			dst = appendRecord(dst, r, id, uint64(t-minTs))
			if ki++; ki == len(req.recs) {
				ri, ki = ri+1, 0
				for ri < len(reqs) && len(reqs[ri].recs) == 0 {
					ri++
				}
			}
		}
		raw := len(dst) - rawStart
		if l.cfg.Codec != CodecNone {
			l.raw = dst
			l.wbuf = compress(l.cfg.Codec, l.wbuf, dst)
		} else {
			l.wbuf = dst
		}
		blen := len(l.wbuf) - start
		h := batchHeader{Len: uint32(blen), Codec: l.cfg.Codec, Count: uint32(count), Base: l.wnext,
			MinTime: minTs, MaxTime: maxTs, RawLen: uint32(raw)}
		putBatchHeader(l.wbuf[start:], h)
		h.CRC = crc(l.wbuf[start+8:])
		putBatchHeader(l.wbuf[start:], h)

		// Roll before this batch if it would overflow a non-empty segment.
		if l.wpos+int64(len(l.wbuf)) > l.cfg.SegmentBytes && l.wpos+int64(start) > segHeaderLen {
			if err := l.flush(start); err != nil {
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
			start = 0
		}
		chunk.batches = append(chunk.batches, batchIdx{base: l.wnext, pos: l.wpos + int64(start), size: uint32(blen),
			count: uint32(count), minTs: minTs, maxTs: maxTs, codec: l.cfg.Codec})
		l.wnext += uint64(count)
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

// flush writes wbuf[:n] at the write position and keeps the rest at the front of wbuf.
func (l *Log) flush(n int) error {
	if n > 0 {
		if err := l.pre.reserve(l.wpos + int64(n)); err != nil {
			return err
		}
		if _, err := l.active.f.WriteAt(l.wbuf[:n], l.wpos); err != nil {
			return fmt.Errorf("spool: write segment %s: %w", l.active.name, err)
		}
		l.wpos += int64(n)
		l.pre.wrote(l.wpos)
	}
	rest := copy(l.wbuf, l.wbuf[n:])
	l.wbuf = l.wbuf[:rest]
	return nil
}

// roll syncs the active segment and starts a new one at the next offset.
func (l *Log) roll() error {
	if err := l.trimActive(); err != nil {
		return err
	}
	if err := l.createSegment(l.wnext); err != nil {
		return err
	}
	select {
	case l.retainCh <- struct{}{}:
	default:
	}
	return nil
}

// trimActive cuts the preallocated zeros off the active segment, releases
// the space reserved past its data, and fsyncs it.
func (l *Log) trimActive() error {
	if l.pre.trim(l.wpos) || l.res.end > l.wpos {
		// Also at the same size: a truncate frees the blocks allocated
		// past the end (ext4, xfs, tmpfs).
		if err := l.active.f.Truncate(l.wpos); err != nil {
			return fmt.Errorf("spool: trim segment %s: %w", l.active.name, err)
		}
		l.pre.reset(l.active.f, l.wpos)
		l.res.end = l.wpos
	}
	if err := l.active.f.Sync(); err != nil {
		return fmt.Errorf("spool: fsync segment %s: %w", l.active.name, err)
	}
	return nil
}

// The range of record times a spool stores (see AppendAsync).
var (
	minRecordTime = time.Unix(0, 0).UTC()
	maxRecordTime = time.Unix(0, 1<<62).UTC()
)

// createSegment creates a new segment (header and preallocated zeros in a
// temporary file, fsynced, renamed into place, directory fsynced) and
// publishes it as the active segment.
func (l *Log) createSegment(base uint64) error {
	name := segName(base)
	path := filepath.Join(l.cfg.Dir, name)
	tmp := path + ".tmp"
	var f *os.File
	reserved := int64(0)
	if sp, ok := l.takeSpare(); ok {
		// Its blocks are reserved: opened without truncating them away.
		f, tmp, reserved = sp.f, sp.path, sp.size
	} else {
		var err error
		if f, err = os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
			return fmt.Errorf("spool: create segment: %w", err)
		}
	}
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return renamedInErr(err, tmp, path) // the temporary file is gone: name the segment
	}
	now := time.Now().UnixNano()
	var hb [segHeaderLen]byte
	encodeSegHeader(hb[:], base, now)
	if _, err := f.WriteAt(hb[:], 0); err != nil {
		return fail(fmt.Errorf("spool: write segment header: %w", err))
	}
	alloc, err := l.pre.prepare(f, reserved)
	if err != nil {
		return fail(err)
	}
	if err := fdatasync(f); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("spool: create segment: %w", err))
	}
	if nf, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
		f.Close()
		f = nf // so that its errors name the segment, not the temporary file
	}
	if err := fsyncDir(l.cfg.Dir); err != nil {
		f.Close()
		return err
	}
	s := &segment{base: base, name: name, path: path, f: f, size: segHeaderLen, end: base, created: now}
	l.mu.Lock()
	l.segs = append(l.segs, s)
	if len(l.segs) == 1 {
		l.next = base
	}
	l.mu.Unlock()
	l.active = s
	l.wpos = segHeaderLen
	l.pre.reset(f, alloc)
	l.res.end = reserved
	if reserved > 0 {
		l.pre.resEnd = reserved
	}
	l.log.Info("segment created", "segment", name, "offset", base)
	return nil
}
