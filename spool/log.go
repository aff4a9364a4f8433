package spool

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
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
	// MinSyncInterval: with SyncGroup, the least time from the start of one
	// group fsync to the start of the next (0 = none, except under
	// VisibleBeforeSync: EarlySyncInterval; negative = none). After a fast
	// fsync the syncer waits out the rest of it, gathering what is written
	// meanwhile; after a slow one it does not wait. It caps the fsyncs per
	// second, and so the I/O operations per second, that a steady stream
	// of small appends costs: a disk that throttles operations (a cloud
	// volume's IOPS limit) stalls every fsync when it is exceeded, which
	// costs more than the wait. The price is acknowledgement latency: an
	// append waits up to this long more for its fsync. On Linux a wait
	// under 2 ms is slept in the kernel, to the microsecond (a runtime
	// timer on an idle process fires up to a millisecond late); a Sync
	// that comes during it waits for its end.
	MinSyncInterval time.Duration
	// VisibleBeforeSync makes each written group visible to readers of this
	// Log (ReadRaw, Reader, Wait; through them pull servers and consumer
	// groups) as soon as the writer's pwrite returns, before the group
	// commit's fdatasync; Append and AppendAsync still return only once the
	// records are durable per Sync, as without it. It takes the fsync off
	// the append-to-delivery path (a disk that stalls an fsync now and then
	// no longer stalls the consumers), at this cost: readers may see
	// records that are not yet durable. A process crash loses none of them
	// (they are in the OS's page cache); an OS crash or power loss can, and
	// then Open finds the unclean close and starts a new epoch at the
	// surviving end, so that consumers that read the lost records learn of
	// the loss through the epoch (see "Log identity and epochs") instead of
	// taking the new records at the same offsets for the ones they read.
	// The recovery checkpoint (meta.json's acknowledged offset) and the
	// deduplication state it covers still follow the fsyncs alone. If an
	// fsync fails, the Log fails as without it (every later Append fails
	// until it is reopened), but readers may already have seen the records
	// that fsync was to cover; reopening starts a new epoch (the Log did
	// not close cleanly). Without effect under SyncNone, which acknowledges
	// once written anyway. With VisibleBeforeSync (and SyncGroup), a zero
	// MinSyncInterval means EarlySyncInterval: the fsyncs no longer delay
	// the readers, and back to back they cost the CPU that delivers.
	VisibleBeforeSync bool
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
	// every segment roll. It is also how often a torn tail cut at Open
	// without its copy, for lack of space, is copied to quarantine/ once
	// space returns.
	RetentionInterval time.Duration
	// RetentionFloor, when set, turns on interest retention: every
	// retention pass asks it for the lowest offset its owner still wants
	// (a node: the least floor of the stream's consumer groups) and
	// whether anyone is known to want anything (ok false: age and size
	// alone decide). A segment whose records are all below the floor is
	// deleted at the next pass; the others are kept until RetentionAge or
	// RetentionBytes, the caps, delete them anyway, which is logged and
	// counted (Log.RetentionForced). It is called without the Log's locks
	// held and must not block.
	RetentionFloor func() (floor uint64, ok bool)
	// DedupWindow is how long a record's message id (HeaderMsgID) is
	// remembered: a record with the same id appended within it is a
	// duplicate (0 = DefaultDedupWindow, 2 minutes; negative = ids are not
	// looked at). See "Idempotent appends" in the package documentation.
	DedupWindow time.Duration
	// MaxDedupIDs caps the message ids remembered; beyond it the oldest
	// are forgotten before their window ends (0 = DefaultMaxDedupIDs).
	MaxDedupIDs int
	// MaxProducers caps the producers (HeaderProducer) whose last
	// sequence is kept; beyond it the one whose last record is oldest is
	// forgotten (0 = DefaultMaxProducers; negative = producer sequences are
	// not looked at).
	MaxProducers int
	// Logger receives lifecycle and recovery events; nil discards them.
	Logger *slog.Logger
}

// EarlySyncInterval is MinSyncInterval's default under VisibleBeforeSync.
// Readers do not wait for the fsyncs there, and fsyncs back to back (one
// per small append at a steady rate) only cost CPU and I/O that delivery
// needs: on a 2-core host at 10 K records/s, they put the p99 from append
// to consumer-group delivery at 4.0–5.7 ms, against 1.0–2.5 ms paced at
// 2 ms (run medians of 5 rounds).
// Appends are acknowledged up to this much later.
const EarlySyncInterval = 2 * time.Millisecond

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
	switch {
	case c.MinSyncInterval == 0 && c.VisibleBeforeSync:
		c.MinSyncInterval = EarlySyncInterval
	case c.MinSyncInterval < 0:
		c.MinSyncInterval = 0
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
	if c.DedupWindow == 0 {
		c.DedupWindow = DefaultDedupWindow
	}
	if c.MaxDedupIDs <= 0 {
		c.MaxDedupIDs = DefaultMaxDedupIDs
	}
	if c.MaxProducers == 0 {
		c.MaxProducers = DefaultMaxProducers
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
	lock     *os.File // the directory lock; nil for a read-only Log

	// The index readers see. The syncer (publish) and, for a read-only Log,
	// refresh change it; the writer appends new segments (createSegment).
	mu      sync.RWMutex // guards the fields below
	segs    []*segment
	next    uint64 // offset after the last published record
	cumMax  int64  // largest record time published
	notify  chan struct{}
	closed  bool
	closeCh chan struct{}

	// Groups written and not yet published, for Readers that
	// ReadWritten (written.go): in write order, wend the end of the last
	// one, wnotify closed when one is noted while wwait says someone
	// waits for it (set under mu, shared or not).
	early   []*pendingWrite
	wend    uint64
	wnotify chan struct{}
	wwait   atomic.Bool

	floor  atomic.Uint64 // SetFloor; read by retention
	forced atomic.Uint64 // records retention's caps removed below Config.RetentionFloor

	fsyncs fsyncStats // observed by the syncer

	beforeSync func() // tests only: the syncer calls it before a group fsync (or the failure it stands for)

	// Identity, epochs and recovery checkpoint (meta.go, checkpoint.go).
	metaMu sync.Mutex     // guards meta and metaFI; serialises writes of meta.json
	meta   meta           // what meta.json holds
	metaFI os.FileInfo    // read-only Logs: the meta.json last read
	ckptCh chan struct{}  // syncer -> checkpointer: records were acknowledged
	rec    RecoveryReport // what Open's recovery did; set before the Log is shared

	// Lifecycle of the write path (write.go, commit.go, retention.go).
	closeMu   sync.RWMutex // guards closing; held shared while enqueueing
	closing   bool
	reqCh     chan *Ack      // Append -> writer
	sq        syncQueue      // writer -> syncer (commit.go)
	retainCh  chan struct{}  // writer -> retainer, after a roll
	stopCh    chan struct{}  // closed by Close: stops the retainer
	wg        sync.WaitGroup // writer, syncer, retainer, read-only watch
	failMu    sync.Mutex
	failErr   error // the first write or fsync failure: nothing is acknowledged after it
	closeOnce sync.Once
	closeErr  error

	// Deduplication (dedup*.go): the writer's view, owned by the writer
	// goroutine, and the view of the acknowledged records.
	dd      *dedupWriter
	ddMu    sync.Mutex // guards durable and acked; taken before mu
	durable durableDedup
	acked   uint64 // offset after the last acknowledged record: the checkpoint's bound

	// Owned by the writer goroutine (write.go).
	active *segment
	wpos   int64
	pre    *preallocator // zero-fills ahead of wpos; the syncer reports fsync sizes to it
	wnext  uint64        // offset of the next record written
	res    reservation   // disk space reserved ahead of wpos (reserve.go)
	held   *heldTail     // a torn tail whose copy waits for space (Open, then the retainer)
	wbuf   []byte
	raw    []byte
	idRand *mrand.ChaCha8 // random UUIDs, seeded from crypto/rand

	// Read-only Logs only (readonly.go, sys_*.go).
	watch  *os.File      // inotify (Linux)
	roStop chan struct{} // closed by Close
	damage *CorruptError // l.mu; damage found where the valid data ends (see scanTail)
}

// Open opens (creating it if needed) the spool in cfg.Dir as its only writer:
// it takes the directory lock (ErrLocked if another process or Log holds it),
// recovers a torn tail (see the package documentation) and starts the writer.
func Open(cfg Config) (*Log, error) { return open(cfg, false) }

// OpenReadOnly opens an existing spool for reading without taking the lock.
// It tolerates a writer appending concurrently: batches appear as they are
// written, followed through inotify. Append, Sync and ApplyRetention return
// ErrReadOnly. A directory that no writer has opened (no segment file, no
// LOCK file) gives an error matching ErrNotSpool.
func OpenReadOnly(cfg Config) (*Log, error) { return open(cfg, true) }

func open(cfg Config, ro bool) (*Log, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	l := &Log{cfg: cfg, readOnly: ro, notify: make(chan struct{}), wnotify: make(chan struct{}), closeCh: make(chan struct{}),
		log: cfg.Logger.With("component", "spool", "dir", cfg.Dir)}
	l.floor.Store(math.MaxUint64)
	if ro {
		if err := checkSpoolDir(cfg.Dir); err != nil {
			return nil, err
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
		if tmps, _ := filepath.Glob(filepath.Join(cfg.Dir, metaFileName+".tmp-*")); len(tmps) > 0 {
			for _, t := range tmps {
				os.Remove(t) // a meta.json write that did not finish
			}
		}
	}
	if err := l.load(); err != nil {
		l.closeFiles()
		return nil, err
	}
	if ro {
		if err := l.loadMetaRO(); err != nil {
			l.closeFiles()
			return nil, err
		}
		l.roStop = make(chan struct{})
		if err := l.startWatch(); err != nil {
			l.closeFiles()
			return nil, err
		}
		return l, nil
	}
	// Before any offset is handed out: a new identity, a new epoch after a
	// cut, the loss of acknowledged records, durably in meta.json.
	if err := l.openMeta(); err != nil {
		l.closeFiles()
		return nil, err
	}
	if err := l.openDedup(); err != nil {
		l.closeFiles()
		return nil, err
	}
	l.pre = newPreallocator(cfg.SegmentBytes, cfg.Sync != SyncNone)
	if len(l.segs) == 0 {
		if err := l.createSegment(0); err != nil {
			l.closeFiles()
			return nil, err
		}
	}
	l.active = l.segs[len(l.segs)-1]
	l.wpos = l.active.size
	alloc := l.wpos // what follows the data may be zeros preallocated before a crash
	if fi, err := l.active.f.Stat(); err == nil {
		alloc = fi.Size()
	}
	l.pre.reset(l.active.f, alloc)
	l.wnext = l.next
	l.acked = l.next
	l.reqCh = make(chan *Ack, 256)
	l.sq.init()
	l.retainCh = make(chan struct{}, 1)
	l.stopCh = make(chan struct{})
	l.ckptCh = make(chan struct{}, 1)
	l.wg.Add(3)
	go l.writer()
	go l.syncer()
	go l.checkpointer()
	if cfg.RetentionAge > 0 || cfg.RetentionBytes > 0 || cfg.RetentionFloor != nil || l.held != nil {
		l.wg.Add(1)
		go l.retainer()
	}
	l.log.Info("spool opened", "offset", l.next, "segments", len(l.segs), "sync", cfg.Sync.String(), "codec", cfg.Codec.String(),
		"id", l.meta.ID.String(), "epoch", l.meta.current().Epoch)
	return l, nil
}

// closeFiles marks the Log closed, wakes every waiter, and closes the
// segment files and the lock.
func (l *Log) closeFiles() {
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

// addBatches appends batches to the index of s, the last segment, and moves
// the end of the log past them (l.mu held, or the Log not yet shared). It
// sets each batch's running maximum time, which SeekTime searches.
func (l *Log) addBatches(s *segment, bs []batchIdx) {
	if len(bs) == 0 {
		return
	}
	for i := range bs {
		b := &bs[i]
		l.cumMax = max(l.cumMax, b.maxTs)
		b.cumMax = l.cumMax
		s.maxTs = max(s.maxTs, b.maxTs)
	}
	s.batches = append(s.batches, bs...)
	s.end = bs[len(bs)-1].end()
	l.next = s.end
}

// appendSegment adds a segment read from disk, with its batches, to the end
// of the index (l.mu held, or the Log not yet shared).
func (l *Log) appendSegment(s *segment) {
	bs := s.batches
	s.batches = bs[:0] // addBatches copies bs onto itself
	l.addBatches(s, bs)
	l.segs = append(l.segs, s)
	l.next = s.end
}

// wakeLocked wakes every Wait and Reader blocked at the tail (l.mu held).
func (l *Log) wakeLocked() {
	close(l.notify)
	l.notify = make(chan struct{})
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

// MaxBatchBytes returns the decompressed batch limit to pass to DecodeBatches.
func (l *Log) MaxBatchBytes() int { return l.cfg.MaxBatchBytes }

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
	ID         uuid.UUID     // the log's identity (zero for a read-only Log of a directory without one)
	Epoch      uint32        // the current epoch
	EpochStart uint64        // the offset the current epoch started at
	Fsyncs     FsyncStats    // latency of the group fsyncs since Open
}

// Stats returns a snapshot of the log's size and range.
func (l *Log) Stats() Stats {
	_, _ = l.catchUp(latest) // a failed look shows what the Log held before
	l.metaMu.Lock()
	id, cur := l.metaNow().ID, l.metaNow().current()
	l.metaMu.Unlock()
	l.mu.RLock()
	defer l.mu.RUnlock()
	st := Stats{Dir: l.cfg.Dir, Oldest: l.oldestLocked(), Next: l.next, Segments: len(l.segs),
		Codec: l.cfg.Codec, Codecs: map[Codec]int{}, ID: id, Epoch: cur.Epoch, EpochStart: cur.Start,
		Fsyncs: l.fsyncs.snapshot()}
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
			if err == nil {
				err = l.checkpoint(true) // everything published is durable now
			}
		}
		if !l.readOnly {
			err = errors.Join(err, l.releaseSpares())
			l.copyHeldTail(true)
		}
		l.closeFiles()
		if ferr := l.failure(); ferr != nil {
			err = ferr
		}
		l.closeErr = err
	})
	return l.closeErr
}
