package spool

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Config configures a Log. The zero value of every field except Dir is
// useful; Open never modifies the caller's Config.
type Config struct {
	// Dir is the stream's directory. Open creates it.
	Dir string
	// Sync says when Append returns; the zero value is SyncGroup.
	Sync SyncPolicy
	// GroupRecords: with SyncGroup, fsync as soon as this many records wait (0 = 1024).
	GroupRecords int
	// GroupInterval: with SyncGroup, fsync at most this long after the first
	// unsynced record was written (0 = 1ms). Negative means no added wait:
	// fsync as soon as the previous fsync is done, so the records that
	// arrive during one fsync form the next group (the lowest latency;
	// groups still grow with the load).
	GroupInterval time.Duration
	// Codec compresses each stored batch (default CodecNone).
	Codec Codec
	// SegmentBytes: a new segment starts when the next batch would take the
	// current one past this size (0 = 64 MiB).
	SegmentBytes int64
	// MaxRecordBytes caps an encoded record: id, time, headers and value (0 = 4 MiB).
	MaxRecordBytes int
	// MaxBatchBytes caps a decompressed batch; readers reject larger ones
	// (0 = the larger of 8 MiB and MaxRecordBytes+64 KiB).
	MaxBatchBytes int
	// RetentionAge deletes segments whose newest record is older (0 = keep).
	RetentionAge time.Duration
	// RetentionBytes deletes the oldest segments while the log is larger (0 = unlimited).
	RetentionBytes int64
	// RetentionInterval is how often retention runs in the background when
	// RetentionAge or RetentionBytes is set (0 = 1 minute). It also runs after
	// every segment roll.
	RetentionInterval time.Duration
	// Logger receives lifecycle and recovery events; nil discards them.
	Logger *slog.Logger
}

func (c Config) normalize() (Config, error) {
	if c.Dir == "" {
		return c, errors.New("spool: config: empty directory")
	}
	if c.GroupRecords <= 0 {
		c.GroupRecords = 1024
	}
	if c.GroupInterval == 0 {
		c.GroupInterval = time.Millisecond
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = 64 << 20
	}
	if c.MaxRecordBytes <= 0 {
		c.MaxRecordBytes = defaultMaxRec
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = max(defaultMaxBatch, c.MaxRecordBytes+64<<10)
	}
	if c.MaxRecordBytes > math.MaxInt32/2 || c.MaxBatchBytes > math.MaxInt32/2 {
		return c, errors.New("spool: config: size limits must be below 1 GiB")
	}
	if c.MaxBatchBytes < c.MaxRecordBytes+16 {
		return c, fmt.Errorf("spool: config: batch limit %d cannot hold a record of %d bytes", c.MaxBatchBytes, c.MaxRecordBytes)
	}
	if c.Codec > CodecZstd {
		return c, fmt.Errorf("spool: config: unknown codec %d", c.Codec)
	}
	if c.Sync < SyncGroup || c.Sync > SyncNone {
		return c, fmt.Errorf("spool: config: unknown sync policy %d", c.Sync)
	}
	if c.RetentionInterval <= 0 {
		c.RetentionInterval = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Log is one stream's spool. A Log opened with Open is the only writer of
// its directory; one opened with OpenReadOnly only reads. All methods are
// safe for concurrent use. Append, Sync, Wait and Reader.Next block; ReadRaw
// and SeekTime do file I/O. Close is idempotent; after it every method returns
// ErrClosed.
type Log struct {
	cfg      Config
	log      *slog.Logger
	readOnly bool
	lock     *os.File

	mu      sync.RWMutex // guards the fields below
	segs    []*segment
	next    uint64 // offset after the last published record
	cumMax  int64
	notify  chan struct{}
	closed  bool
	closeCh chan struct{}

	floor atomic.Uint64

	// write path
	closeMu   sync.RWMutex // guards closing; held shared while enqueueing
	closing   bool
	reqCh     chan *Ack
	syncCh    chan *pendingWrite
	retainCh  chan struct{}
	stopCh    chan struct{}
	wg        sync.WaitGroup
	failMu    sync.Mutex
	failErr   error
	closeOnce sync.Once
	closeErr  error

	// owned by the writer goroutine
	active *segment
	wpos   int64
	alloc  int64 // end of the zero-filled (preallocated) part of the active file
	// zero-filling ahead of the data, in the filler goroutine
	fillCh  chan fillJob
	fillRes chan fillJob
	filling bool
	// smallSyncs is set by the syncer while fsyncs carry little data: then
	// preallocation pays (it saves a journal commit per fsync); with large
	// fsyncs writing the zeros costs more than it saves.
	smallSyncs atomic.Bool
	syncAvg    int64 // syncer only: moving average of bytes per fsync
	wnext      uint64
	wbuf       []byte
	raw        []byte
	idRand     *mrand.ChaCha8 // random UUIDs, seeded from crypto/rand

	watch  *os.File      // read-only: inotify (Linux)
	roStop chan struct{} // read-only: closed by Close
}

// Ack is the pending result of AppendAsync. Its methods are safe for
// concurrent use and may be called any number of times.
type Ack struct {
	recs    []Record
	bytes   int // the records' body sizes, summed by AppendAsync
	now     int64
	force   bool // Sync: fsync now
	first   uint64
	err     error
	encoded chan struct{} // closed once the writer no longer reads recs
	done    chan struct{} // closed once first and err are set
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

type fillJob struct {
	f        *os.File
	from, to int64
	err      error
}

type segChunk struct {
	seg     *segment
	batches []batchIdx
	endPos  int64
}

type pendingWrite struct {
	chunks  []segChunk
	reqs    []*Ack
	records int
	force   bool
	err     error
}

// Open opens (creating it if needed) the spool in cfg.Dir as its only writer:
// it takes the directory lock (ErrLocked if another process or Log holds it),
// recovers a torn tail (see the package documentation) and starts the writer.
func Open(cfg Config) (*Log, error) { return open(cfg, false) }

// OpenReadOnly opens an existing spool for reading without taking the lock.
// It tolerates a writer appending concurrently: batches appear as they are
// written, followed through inotify. Append, Sync and ApplyRetention return
// ErrReadOnly.
func OpenReadOnly(cfg Config) (*Log, error) { return open(cfg, true) }

func open(cfg Config, ro bool) (*Log, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	l := &Log{cfg: cfg, readOnly: ro, notify: make(chan struct{}), closeCh: make(chan struct{}),
		log: cfg.Logger.With("component", "spool", "dir", cfg.Dir)}
	l.floor.Store(math.MaxUint64)
	l.smallSyncs.Store(cfg.Sync != SyncNone && !ro)
	if ro {
		if _, err := os.Stat(cfg.Dir); err != nil {
			return nil, fmt.Errorf("spool: open read-only: %w", err)
		}
	} else {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("spool: create directory: %w", err)
		}
		if l.lock, err = lockFile(filepath.Join(cfg.Dir, "LOCK")); err != nil {
			return nil, err
		}
		if tmps, _ := filepath.Glob(filepath.Join(cfg.Dir, "*"+segSuffix+".tmp")); len(tmps) > 0 {
			for _, t := range tmps {
				os.Remove(t) // a segment whose creation did not finish
			}
		}
	}
	if err := l.load(); err != nil {
		l.closeFiles()
		return nil, err
	}
	if ro {
		l.roStop = make(chan struct{})
		if err := l.startWatch(); err != nil {
			l.closeFiles()
			return nil, err
		}
		return l, nil
	}
	if len(l.segs) == 0 {
		if err := l.createSegment(0); err != nil {
			l.closeFiles()
			return nil, err
		}
	}
	l.active = l.segs[len(l.segs)-1]
	l.wpos = l.active.size
	if fi, err := l.active.f.Stat(); err == nil {
		l.alloc = fi.Size()
	}
	l.wnext = l.next
	l.reqCh = make(chan *Ack, 256)
	l.syncCh = make(chan *pendingWrite, 64)
	l.retainCh = make(chan struct{}, 1)
	l.stopCh = make(chan struct{})
	l.fillCh = make(chan fillJob)
	l.fillRes = make(chan fillJob, 1)
	l.wg.Add(3)
	go l.writer()
	go l.syncer()
	go l.filler()
	if cfg.RetentionAge > 0 || cfg.RetentionBytes > 0 {
		l.wg.Add(1)
		go l.retainer()
	}
	l.log.Info("spool opened", "offset", l.next, "segments", len(l.segs), "sync", cfg.Sync.String(), "codec", cfg.Codec.String())
	return l, nil
}

// load reads the segment files and builds the index, recovering the tail.
func (l *Log) load() error {
	bases, err := listSegments(l.cfg.Dir)
	if err != nil {
		return fmt.Errorf("spool: list segments: %w", err)
	}
	for i, base := range bases {
		last := i == len(bases)-1
		s, err := l.loadSegment(base, last)
		if err != nil {
			return err
		}
		if s == nil {
			continue
		}
		if len(l.segs) > 0 {
			prev := l.segs[len(l.segs)-1]
			if s.base != prev.end {
				if s.base < prev.end || !gapRecorded(l.cfg.Dir, prev.end, s.base) {
					return &CorruptError{Segment: s.name, Offset: prev.end,
						Reason: fmt.Sprintf("segment starts at offset %d but the previous one ends at %d", s.base, prev.end)}
				}
				l.log.Warn("gap left by repair", "segment", s.name, "from", prev.end, "to", s.base)
			}
		}
		for j := range s.batches {
			b := &s.batches[j]
			l.cumMax = max(l.cumMax, b.maxTs)
			b.cumMax = l.cumMax
		}
		l.segs = append(l.segs, s)
		l.next = s.end
	}
	return nil
}

// loadSegment opens and scans one segment. It returns nil, nil for a
// last segment whose header was never completely written.
func (l *Log) loadSegment(base uint64, last bool) (*segment, error) {
	name := segName(base)
	path := filepath.Join(l.cfg.Dir, name)
	flag := os.O_RDWR
	if l.readOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("spool: open segment: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("spool: stat segment: %w", err)
	}
	size := fi.Size()
	var hb [segHeaderLen]byte
	if size < segHeaderLen && last {
		// Crash while creating the segment: nothing in it was ever acknowledged.
		f.Close()
		if l.readOnly {
			return nil, nil
		}
		if err := l.cutTail(path, name, 0, size, base); err != nil {
			return nil, err
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("spool: remove torn segment: %w", err)
		}
		return nil, fsyncDir(l.cfg.Dir)
	}
	if _, err := f.ReadAt(hb[:], 0); err != nil {
		f.Close()
		return nil, &CorruptError{Segment: name, Offset: base, Reason: fmt.Sprintf("read segment header: %v", err)}
	}
	h, err := decodeSegHeader(hb[:], name)
	if err != nil {
		f.Close()
		var ce *CorruptError
		if errors.As(err, &ce) {
			ce.Offset = base
		}
		return nil, err
	}
	if h.Base != base {
		f.Close()
		return nil, &CorruptError{Segment: name, Offset: base, Reason: fmt.Sprintf("header base offset %d does not match the file name", h.Base)}
	}
	res, err := scanSegment(f, name, segHeaderLen, size, base, last, l.cfg.MaxBatchBytes)
	if err != nil {
		f.Close()
		return nil, err
	}
	if res.bad != nil {
		zero, err := zeroFrom(f, res.end, size)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("spool: scan segment %s: %w", name, err)
		}
		if zero {
			res.bad = nil // preallocated space, never written
		}
	}
	if res.bad != nil {
		if !last {
			f.Close()
			return nil, res.bad
		}
		if !l.readOnly {
			at, found, err := findValidAfter(f, res.end, size, res.next, l.cfg.MaxBatchBytes)
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("spool: scan segment %s: %w", name, err)
			}
			if found {
				f.Close()
				res.bad.Reason += fmt.Sprintf(" (a valid batch follows at byte %d)", at)
				return nil, res.bad
			}
			l.log.Warn("torn tail truncated", "segment", name, "offset", res.next, "pos", res.end,
				"bytes", size-res.end, "reason", res.bad.Reason)
			if err := l.cutTail(path, name, res.end, size, res.next); err != nil {
				f.Close()
				return nil, err
			}
			if err := f.Truncate(res.end); err != nil {
				f.Close()
				return nil, fmt.Errorf("spool: truncate torn tail: %w", err)
			}
			if err := fdatasync(f); err != nil {
				f.Close()
				return nil, err
			}
		}
	}
	s := &segment{base: base, name: name, path: path, f: f, size: res.end, end: res.next,
		batches: res.batches, created: h.Created}
	for _, b := range res.batches {
		s.maxTs = max(s.maxTs, b.maxTs)
	}
	return s, nil
}

// cutTail copies bytes [from, size) of a segment into quarantine/ and makes the copy durable.
func (l *Log) cutTail(path, name string, from, size int64, offset uint64) error {
	qdir := filepath.Join(l.cfg.Dir, "quarantine")
	if err := os.MkdirAll(qdir, 0o755); err != nil {
		return fmt.Errorf("spool: create quarantine: %w", err)
	}
	src, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("spool: copy torn tail: %w", err)
	}
	defer src.Close()
	dst, err := os.Create(filepath.Join(qdir, fmt.Sprintf("%s.torn-%d-%d", name, from, time.Now().UnixNano())))
	if err != nil {
		return fmt.Errorf("spool: copy torn tail: %w", err)
	}
	_, err = io.Copy(dst, io.NewSectionReader(src, from, size-from))
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("spool: copy torn tail: %w", err)
	}
	if err := fsyncDir(qdir); err != nil {
		return err
	}
	return fsyncDir(l.cfg.Dir)
}

// createSegment creates a new segment (header and preallocated zeros in a
// temporary file, fsynced, renamed into place, directory fsynced) and
// publishes it as the active segment.
func (l *Log) createSegment(base uint64) error {
	name := segName(base)
	path := filepath.Join(l.cfg.Dir, name)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("spool: create segment: %w", err)
	}
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	now := time.Now().UnixNano()
	var hb [segHeaderLen]byte
	encodeSegHeader(hb[:], base, now)
	if _, err := f.WriteAt(hb[:], 0); err != nil {
		return fail(fmt.Errorf("spool: write segment header: %w", err))
	}
	alloc := int64(segHeaderLen)
	if l.smallSyncs.Load() {
		alloc = max(alloc, min(l.cfg.SegmentBytes, preallocChunk))
		if err := writeZeros(f, segHeaderLen, alloc); err != nil {
			return fail(err)
		}
	}
	if err := fdatasync(f); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("spool: create segment: %w", err))
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
	l.alloc = max(alloc, segHeaderLen)
	l.log.Info("segment created", "segment", name, "offset", base)
	return nil
}

func (l *Log) closeFiles() {
	l.mu.Lock()
	for _, s := range l.segs {
		s.f.Close()
	}
	l.mu.Unlock()
	if l.lock != nil {
		l.lock.Close()
	}
}

func (l *Log) failure() error {
	l.failMu.Lock()
	defer l.failMu.Unlock()
	return l.failErr
}

func (l *Log) fail(err error) {
	l.failMu.Lock()
	if l.failErr == nil {
		l.failErr = err
		l.log.Error("spool write failed; appends fail until reopened", "err", err)
	}
	l.failMu.Unlock()
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
	a, err := l.AppendAsync(ctx, recs...)
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
// queued (it blocks only while the queue is full, or until ctx ends). The
// returned Ack completes when Append would have returned. The caller must
// not modify recs until then. It lets one goroutine keep several appends in
// flight, so that writing the next group overlaps the fsync of the last one.
func (l *Log) AppendAsync(ctx context.Context, recs ...Record) (*Ack, error) {
	if l.readOnly {
		return nil, ErrReadOnly
	}
	size := 0
	for i := range recs {
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
	a := &Ack{recs: recs, bytes: size, now: time.Now().UnixNano(), encoded: make(chan struct{}), done: make(chan struct{})}
	if len(recs) == 0 {
		a.first = l.NextOffset()
		close(a.encoded)
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
	defer close(l.syncCh)
	defer func() {
		if err := l.waitFill(); err != nil {
			l.fail(err)
		}
		close(l.fillCh)
	}()
	group := make([]*Ack, 0, 256)
	for {
		req, ok := <-l.reqCh
		if !ok {
			return
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
				group = append(group, r)
				n += len(r.recs)
				size += r.bytes
			default:
				break drain
			}
		}
		pw := &pendingWrite{reqs: append([]*Ack(nil), group...), records: n}
		if err := l.failure(); err != nil {
			pw.err = err
		} else if err := l.writeGroup(pw); err != nil {
			l.fail(err)
			pw.err = err
		}
		for _, r := range group {
			close(r.encoded)
			pw.force = pw.force || r.force
		}
		l.syncCh <- pw
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
		end := l.wpos + int64(n)
		if end > l.alloc {
			if err := l.waitFill(); err != nil {
				return err
			}
		}
		prealloc := l.smallSyncs.Load()
		if end > l.alloc && prealloc {
			// Keep zero-filled space ahead of the data: fdatasync of blocks that
			// already exist does not wait for a journal commit.
			na := max(end, min(l.alloc+preallocChunk, l.cfg.SegmentBytes))
			if err := writeZeros(l.active.f, end, na); err != nil {
				return err
			}
			l.alloc = max(na, end)
		}
		if _, err := l.active.f.WriteAt(l.wbuf[:n], l.wpos); err != nil {
			return fmt.Errorf("spool: write segment %s: %w", l.active.name, err)
		}
		l.wpos += int64(n)
		l.alloc = max(l.alloc, l.wpos)
		if prealloc && !l.filling && l.alloc-l.wpos < preallocChunk/2 && l.alloc < l.cfg.SegmentBytes {
			// Zero-fill the next chunk in the background while we write below it.
			l.filling = true
			l.fillCh <- fillJob{f: l.active.f, from: l.alloc, to: min(l.alloc+preallocChunk, l.cfg.SegmentBytes)}
		}
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

// trimActive cuts the preallocated zeros off the active segment and fsyncs it.
func (l *Log) trimActive() error {
	if err := l.waitFill(); err != nil {
		return err
	}
	if l.alloc > l.wpos {
		if err := l.active.f.Truncate(l.wpos); err != nil {
			return fmt.Errorf("spool: trim segment %s: %w", l.active.name, err)
		}
		l.alloc = l.wpos
	}
	if err := l.active.f.Sync(); err != nil {
		return fmt.Errorf("spool: fsync segment %s: %w", l.active.name, err)
	}
	return nil
}

// waitFill waits for the background zero-fill, if one runs (writer only).
func (l *Log) waitFill() error {
	if !l.filling {
		return nil
	}
	j := <-l.fillRes
	l.filling = false
	if j.err != nil {
		return j.err
	}
	l.alloc = max(l.alloc, j.to)
	return nil
}

// filler zero-fills preallocated space for the writer.
func (l *Log) filler() {
	defer l.wg.Done()
	for j := range l.fillCh {
		j.err = writeZeros(j.f, j.from, j.to)
		if j.err == nil {
			// Put the zeros on disk now, so that the syncer's fdatasync has
			// only the data to write.
			j.err = fdatasync(j.f)
		}
		l.fillRes <- j
	}
}

// syncer fsyncs written groups according to the policy, publishes them to
// readers and acknowledges the appends.
func (l *Log) syncer() {
	defer l.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var batch []*pendingWrite
	for {
		pw, ok := <-l.syncCh
		if !ok {
			return
		}
		batch = append(batch[:0], pw)
		records := pw.records
		force := pw.force
		open := true
		// Take whatever else is already written.
	more:
		for {
			select {
			case p, ok := <-l.syncCh:
				if !ok {
					open = false
					break more
				}
				batch = append(batch, p)
				records += p.records
				force = force || p.force
			default:
				break more
			}
		}
		if l.cfg.Sync == SyncGroup && l.cfg.GroupInterval > 0 && !force && open && records < l.cfg.GroupRecords {
			timer.Reset(l.cfg.GroupInterval)
		wait:
			for records < l.cfg.GroupRecords && !force {
				select {
				case p, ok := <-l.syncCh:
					if !ok {
						open = false
						break wait
					}
					batch = append(batch, p)
					records += p.records
					force = force || p.force
				case <-timer.C:
					break wait
				}
			}
			timer.Stop()
		}
		l.commit(batch, force || l.cfg.Sync != SyncNone)
		if !open {
			return
		}
	}
}

// The range of record times a spool stores (see AppendAsync).
var (
	minRecordTime = time.Unix(0, 0).UTC()
	maxRecordTime = time.Unix(0, 1<<62).UTC()
)

// slowFsync: fsyncs that take longer are logged.
const slowFsync = 500 * time.Millisecond

// commit fsyncs (if doSync) the segments written by batch, publishes the
// batches and acknowledges the appends.
func (l *Log) commit(batch []*pendingWrite, doSync bool) {
	var err error
	if doSync {
		// After a failed write or fsync nothing more is acknowledged: the
		// groups written before the failure was known were never synced.
		err = l.failure()
	}
	if doSync && err == nil {
		var bytes int64
		for _, pw := range batch {
			for _, c := range pw.chunks {
				for _, b := range c.batches {
					bytes += int64(b.size)
				}
			}
		}
		l.syncAvg += (bytes - l.syncAvg) / 8
		l.smallSyncs.Store(l.syncAvg < largeSyncBytes)
		t0 := time.Now()
		defer func() {
			if d := time.Since(t0); d > slowFsync && err == nil {
				l.log.Warn("slow fsync", "duration", d, "bytes", bytes)
			}
		}()
		var last *segment
	syncs:
		for _, pw := range batch {
			for _, c := range pw.chunks {
				if c.seg != last {
					if err = fdatasync(c.seg.f); err != nil {
						break syncs
					}
					last = c.seg
				}
			}
		}
		if last == nil && err == nil {
			err = fdatasync(l.activeFile())
		}
		if err != nil {
			l.fail(err)
		}
	}
	if err == nil {
		l.publish(batch)
	}
	for _, pw := range batch {
		e := pw.err
		if e == nil {
			e = err
		}
		for _, r := range pw.reqs {
			r.err = e
			close(r.done)
		}
	}
}

func (l *Log) activeFile() *os.File {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.segs[len(l.segs)-1].f
}

func (l *Log) publish(batch []*pendingWrite) {
	l.mu.Lock()
	changed := false
	for _, pw := range batch {
		if pw.err != nil {
			continue
		}
		for _, c := range pw.chunks {
			s := c.seg
			for _, b := range c.batches {
				l.cumMax = max(l.cumMax, b.maxTs)
				b.cumMax = l.cumMax
				s.maxTs = max(s.maxTs, b.maxTs)
				s.batches = append(s.batches, b)
				s.end = b.end()
				l.next = b.end()
				changed = true
			}
			s.size = c.endPos
		}
	}
	if changed {
		close(l.notify)
		l.notify = make(chan struct{})
	}
	l.mu.Unlock()
}

// NextOffset returns the offset the next appended record will get: every
// offset below it that is not below OldestOffset is readable.
func (l *Log) NextOffset() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.next
}

// OldestOffset returns the oldest retained offset (NextOffset when the log is empty).
func (l *Log) OldestOffset() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.oldestLocked()
}

func (l *Log) oldestLocked() uint64 {
	for _, s := range l.segs {
		if len(s.batches) > 0 {
			return s.batches[0].base
		}
	}
	return l.next
}

// Wait blocks until the record at offset is readable (NextOffset() > offset)
// and returns nil, or returns ctx.Err() or ErrClosed. It does not poll: the
// writer (or, for a read-only Log, an inotify watch) wakes it.
func (l *Log) Wait(ctx context.Context, offset uint64) error {
	return l.wait(ctx, offset, nil)
}

// wait is Wait that also returns ErrClosed when stop is closed.
func (l *Log) wait(ctx context.Context, offset uint64, stop <-chan struct{}) error {
	for {
		l.mu.RLock()
		if l.closed {
			l.mu.RUnlock()
			return ErrClosed
		}
		if l.next > offset {
			l.mu.RUnlock()
			return nil
		}
		ch := l.notify
		l.mu.RUnlock()
		if l.readOnly {
			if err := l.refresh(); err != nil {
				return err
			}
			l.mu.RLock()
			ok := l.next > offset
			l.mu.RUnlock()
			if ok {
				return nil
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.closeCh:
			return ErrClosed
		case <-stop:
			return ErrClosed
		}
	}
}

// ReadRaw returns whole stored batches exactly as on disk (still compressed,
// for DecodeBatches or for sending over the network), starting with the batch
// that contains from. It returns at least one batch, even one bigger than
// maxBytes, and otherwise stops before exceeding maxBytes; it does not cross
// a segment boundary. next is the offset after the last record returned. When
// from >= NextOffset() it returns no data and next == from. Below
// OldestOffset it returns an *OutOfRangeError. The returned slice is new and
// owned by the caller.
func (l *Log) ReadRaw(from uint64, maxBytes int) ([]byte, uint64, error) {
	if l.readOnly && from >= l.NextOffset() {
		if err := l.refresh(); err != nil {
			return nil, from, err
		}
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, from, ErrClosed
	}
	if old := l.oldestLocked(); from < old {
		return nil, from, &OutOfRangeError{Requested: from, Oldest: old}
	}
	if from >= l.next {
		return nil, from, nil
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].end > from })
	s := l.segs[i]
	j := sort.Search(len(s.batches), func(j int) bool { return s.batches[j].end() > from })
	start := s.batches[j].pos
	end := start + int64(s.batches[j].size)
	k := j + 1
	for k < len(s.batches) && end+int64(s.batches[k].size)-start <= int64(maxBytes) {
		end += int64(s.batches[k].size)
		k++
	}
	data := make([]byte, end-start)
	if _, err := s.f.ReadAt(data, start); err != nil {
		return nil, from, fmt.Errorf("spool: read segment %s: %w", s.name, err)
	}
	return data, s.batches[k-1].end(), nil
}

// MaxBatchBytes returns the decompressed batch limit to pass to DecodeBatches.
func (l *Log) MaxBatchBytes() int { return l.cfg.MaxBatchBytes }

// SeekTime returns the first offset whose record time is at or after t
// (NextOffset when there is none). Batches are found through the in-memory
// time index; only candidate batches are read.
func (l *Log) SeekTime(t time.Time) (uint64, error) {
	tn := t.UnixNano()
	if l.readOnly {
		if err := l.refresh(); err != nil {
			return 0, err
		}
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, ErrClosed
	}
	i := sort.Search(len(l.segs), func(i int) bool {
		// The running maximum time up to the end of segment i: an empty
		// segment (left by a repair or a crash after a roll) carries the
		// maximum of the segments before it, keeping the predicate monotonic.
		for k := i; k >= 0; k-- {
			if s := l.segs[k]; len(s.batches) > 0 {
				return s.batches[len(s.batches)-1].cumMax >= tn
			}
		}
		return false
	})
	for ; i < len(l.segs); i++ {
		s := l.segs[i]
		j := sort.Search(len(s.batches), func(j int) bool { return s.batches[j].cumMax >= tn })
		for ; j < len(s.batches); j++ {
			b := s.batches[j]
			if b.maxTs < tn {
				continue
			}
			data := make([]byte, b.size)
			if _, err := s.f.ReadAt(data, b.pos); err != nil {
				return 0, fmt.Errorf("spool: read segment %s: %w", s.name, err)
			}
			found := uint64(math.MaxUint64)
			errFound := errors.New("found")
			err := DecodeBatches(data, 0, l.cfg.MaxBatchBytes, func(r Record) error {
				if r.Time.UnixNano() >= tn {
					found = r.Offset
					return errFound
				}
				return nil
			})
			if err == errFound {
				return found, nil
			}
			if err != nil {
				if ce, ok := err.(*CorruptError); ok {
					ce.Segment, ce.Pos = s.name, b.pos
				}
				return 0, err
			}
		}
	}
	return l.next, nil
}

// SetFloor sets the lowest offset the caller still needs. Retention then
// deletes a segment only if every offset in it is below floor (the segment
// ends at or before floor). The default, before any call, is no floor.
func (l *Log) SetFloor(offset uint64) { l.floor.Store(offset) }

// ApplyRetention deletes the oldest whole segments that Config.RetentionAge
// or Config.RetentionBytes says to delete, never the segment being written
// and never one holding an offset at or above the floor (SetFloor). It
// returns the names of the deleted segment files. The Log also runs it every
// Config.RetentionInterval and after each segment roll.
func (l *Log) ApplyRetention() ([]string, error) {
	if l.readOnly {
		return nil, ErrReadOnly
	}
	floor := l.floor.Load()
	now := time.Now().UnixNano()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	var victims []*segment
	for len(l.segs) > 1 {
		s := l.segs[0]
		if l.segs[1].base > l.next || s.end > floor {
			break
		}
		old := l.cfg.RetentionAge > 0 && s.maxTs < now-int64(l.cfg.RetentionAge)
		big := l.cfg.RetentionBytes > 0 && total > l.cfg.RetentionBytes
		if !old && !big {
			break
		}
		victims = append(victims, s)
		total -= s.size
		l.segs = l.segs[1:]
	}
	l.mu.Unlock()
	var removed []string
	var err error
	for _, s := range victims {
		s.f.Close()
		if e := os.Remove(s.path); e != nil && !os.IsNotExist(e) {
			err = errors.Join(err, fmt.Errorf("spool: remove segment: %w", e))
			continue
		}
		removed = append(removed, s.name)
		l.log.Info("segment removed by retention", "segment", s.name, "offset", s.base, "end", s.end)
	}
	if len(victims) > 0 {
		err = errors.Join(err, fsyncDir(l.cfg.Dir))
	}
	return removed, err
}

func (l *Log) retainer() {
	defer l.wg.Done()
	t := time.NewTicker(l.cfg.RetentionInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stopCh:
			return
		case <-t.C:
		case <-l.retainCh:
		}
		if _, err := l.ApplyRetention(); err != nil && !errors.Is(err, ErrClosed) {
			l.log.Error("retention failed", "err", err)
		}
	}
}

// Stats describes a Log at one moment.
type Stats struct {
	Dir        string
	Oldest     uint64 // oldest retained offset
	Next       uint64 // next offset to be assigned
	Segments   int
	Batches    int
	Bytes      int64 // bytes in segment files (published part)
	OldestTime time.Time
	NewestTime time.Time
	Codec      Codec         // configured codec for new batches
	Codecs     map[Codec]int // stored batches per codec
}

// Stats returns a snapshot of the log's size and range.
func (l *Log) Stats() Stats {
	if l.readOnly {
		_ = l.refresh()
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	st := Stats{Dir: l.cfg.Dir, Oldest: l.oldestLocked(), Next: l.next, Segments: len(l.segs),
		Codec: l.cfg.Codec, Codecs: map[Codec]int{}}
	var minTs, maxTs int64 = math.MaxInt64, math.MinInt64
	for _, s := range l.segs {
		st.Bytes += s.size
		st.Batches += len(s.batches)
		for _, b := range s.batches {
			st.Codecs[b.codec]++
			minTs, maxTs = min(minTs, b.minTs), max(maxTs, b.maxTs)
		}
	}
	if st.Batches > 0 {
		st.OldestTime, st.NewestTime = time.Unix(0, minTs), time.Unix(0, maxTs)
	}
	return st
}

// Close stops the writer after it has written and synced (per policy; at
// least written to the OS) every Append already queued, closes the files and
// releases the lock. It is idempotent; it returns the first write error.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		if !l.readOnly {
			l.closeMu.Lock()
			l.closing = true
			close(l.reqCh)
			l.closeMu.Unlock()
			close(l.stopCh)
		} else {
			close(l.roStop)
			if l.watch != nil {
				l.watch.Close()
			}
		}
		l.wg.Wait()
		var err error
		if !l.readOnly && l.failure() == nil {
			err = l.trimActive()
		}
		l.mu.Lock()
		l.closed = true
		close(l.closeCh)
		for _, s := range l.segs {
			s.f.Close()
		}
		l.mu.Unlock()
		if l.lock != nil {
			l.lock.Close()
		}
		if ferr := l.failure(); ferr != nil {
			err = ferr
		}
		l.closeErr = err
	})
	return l.closeErr
}
