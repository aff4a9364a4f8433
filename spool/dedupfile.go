package spool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/fastmq/fastmq/internal/fsutil"
)

// The durable side of deduplication: what the acknowledged records say,
// kept in dedup.json by the checkpointer and rebuilt on Open from it plus
// a scan of the records after the recovery checkpoint (and of the message
// id window, when ids were used within it).

// dedupFileName is the deduplication state file of a stream directory.
const dedupFileName = "dedup.json"

// dedupVersion is the format version of dedup.json this package writes
// and the newest it reads.
const dedupVersion = 1

// maxDedupFileBytes bounds what Open reads of dedup.json.
const maxDedupFileBytes = 64 << 20

// dedupFile is the content of dedup.json.
type dedupFile struct {
	// Through: the file reflects every record below this offset.
	Through uint64 `json:"through"`
	// IDTime is the time of the newest record with a message id below
	// Through (Unix nanoseconds; 0 for none).
	IDTime    int64       `json:"id_time,omitempty"`
	Producers []prodEntry `json:"producers"`
}

// prodEntry is one producer's mark in dedup.json.
type prodEntry struct {
	ID     string `json:"id"`
	Seq    uint64 `json:"seq"`
	Offset uint64 `json:"offset"`
	Time   int64  `json:"time"`
}

// durableDedup is the deduplication state of the acknowledged records
// (l.ddMu): the syncer applies each group's events before it publishes
// the group, and the checkpointer writes it.
type durableDedup struct {
	prods  producers
	idTime int64
	dirty  bool // changed since dedup.json was last written
}

// decodeDedupFile decodes and checks dedup.json.
func decodeDedupFile(b []byte) (dedupFile, error) {
	var f dedupFile
	if len(b) > maxDedupFileBytes {
		return f, fmt.Errorf("%d bytes, more than %d", len(b), maxDedupFileBytes)
	}
	v, err := fsutil.DecodeVersionedJSON(b, dedupVersion, &f)
	if err != nil {
		return f, err
	}
	if v == 0 {
		return f, errors.New("no version")
	}
	seen := make(map[string]bool, len(f.Producers))
	for i, e := range f.Producers {
		switch {
		case len(e.ID) == 0 || len(e.ID) > MaxProducerIDLen:
			return f, fmt.Errorf("producer %d: id of %d bytes", i, len(e.ID))
		case e.Seq == 0:
			return f, fmt.Errorf("producer %q: sequence 0", e.ID)
		case e.Offset >= f.Through:
			return f, fmt.Errorf("producer %q: offset %d at or after %d, the end of what the file covers", e.ID, e.Offset, f.Through)
		case seen[e.ID]:
			return f, fmt.Errorf("producer %q twice", e.ID)
		}
		seen[e.ID] = true
	}
	return f, nil
}

// readDedup reads dir's dedup.json; a missing file gives ok false.
func readDedup(dir string) (f dedupFile, ok bool, err error) {
	name := filepath.Join(dir, dedupFileName)
	b, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return f, false, nil
	}
	if err != nil {
		return f, false, fmt.Errorf("spool: read %s: %w", name, err)
	}
	f, err = decodeDedupFile(b)
	if errors.Is(err, fsutil.ErrUnknownVersion) {
		return f, false, fmt.Errorf("%w: state file %s: %v", ErrUnsupportedVersion, name, err)
	}
	if err != nil {
		return f, false, &dedupDamage{file: name, reason: err.Error()}
	}
	return f, true, nil
}

// dedupDamage reports a dedup.json that does not decode: Open moves it to
// quarantine/ and rebuilds the state from the log.
type dedupDamage struct{ file, reason string }

func (e *dedupDamage) Error() string {
	return fmt.Sprintf("spool: state file %s is damaged (%s)", e.file, e.reason)
}

// snapshot returns the file content for the records below through (l.ddMu held).
func (d *durableDedup) snapshot(through uint64) dedupFile {
	f := dedupFile{Through: through, IDTime: d.idTime, Producers: make([]prodEntry, 0, len(d.prods.m))}
	for id, m := range d.prods.m {
		f.Producers = append(f.Producers, prodEntry{ID: id, Seq: m.Seq, Offset: m.Offset, Time: m.Time})
	}
	sort.Slice(f.Producers, func(i, j int) bool { return f.Producers[i].ID < f.Producers[j].ID })
	return f
}

// applyDurable adds the deduplication events of the groups about to be
// published to the durable view (syncer, l.ddMu held).
func (l *Log) applyDurable(batch []*pendingWrite) {
	for _, pw := range batch {
		if pw.dd == nil || pw.err != nil {
			continue
		}
		for _, e := range pw.dd.prodEvents {
			l.durable.prods.set(e.producer, e.mark)
		}
		if len(pw.dd.prodEvents) > 0 || pw.dd.idTime > l.durable.idTime {
			l.durable.idTime = max(l.durable.idTime, pw.dd.idTime)
			l.durable.dirty = true
		}
	}
}

// openDedup builds the deduplication state before the writer starts
// (Open, after openMeta): the producers from dedup.json, then the records
// after the recovery checkpoint, and the message ids of the window.
func (l *Log) openDedup() error {
	noIDs, noProds := l.cfg.DedupWindow < 0, l.cfg.MaxProducers < 0
	l.dd = &dedupWriter{ids: newMsgIDs(l.cfg.DedupWindow, l.cfg.MaxDedupIDs), prods: newProducers(max(l.cfg.MaxProducers, 1))}
	l.durable = durableDedup{prods: newProducers(max(l.cfg.MaxProducers, 1))}
	if noIDs && noProds {
		return nil
	}
	next, oldest := l.next, l.oldestLocked()
	// Everything below the checkpoint is in dedup.json (or carried no
	// producer); a new log, or a damaged file, is scanned whole.
	from := min(l.meta.Acked, next)
	f, ok, err := readDedup(l.cfg.Dir)
	var damaged *dedupDamage
	if errors.As(err, &damaged) {
		if qerr := l.quarantineFile(dedupFileName); qerr != nil {
			return errors.Join(err, qerr)
		}
		l.log.Error("deduplication state damaged: moved to quarantine, rebuilding it from the whole log", "err", err)
		from, err = oldest, nil
	}
	if err != nil {
		return err
	}
	if l.rec.NewID {
		// No checkpoint to go by: a new log, one from before meta.json
		// (whose records carried no meaning for these headers), or one
		// whose meta.json Repair set aside: dedup.json covers its part.
		from = next
		if ok {
			from = min(f.Through, next)
		}
	}
	if ok {
		for _, e := range f.Producers {
			if e.Offset < next { // records lost by recovery are no mark
				l.durable.prods.set(e.ID, prodMark{Seq: e.Seq, Offset: e.Offset, Time: e.Time})
			}
		}
		l.durable.idTime = f.IDTime
	}
	now := time.Now().UnixNano()
	windowStart := now - int64(l.cfg.DedupWindow)
	start := from
	if !noIDs && l.durable.idTime >= windowStart {
		if o, err := l.SeekTime(time.Unix(0, windowStart)); err == nil {
			start = min(start, o)
		}
	}
	start = max(start, oldest)
	scanned := 0
	for o := start; o < next; {
		data, nx, err := l.ReadRaw(o, 1<<20)
		if err != nil {
			return fmt.Errorf("spool: rebuild deduplication state: %w", err)
		}
		if len(data) == 0 || nx <= o {
			break
		}
		err = DecodeBatches(data, o, l.cfg.MaxBatchBytes, func(r Record) error {
			if len(r.Headers) == 0 {
				return nil
			}
			k, ok, err := parseDedup(&r, 0, noIDs, noProds)
			if err != nil || !ok {
				return nil // stored before the headers meant anything
			}
			scanned++
			t := r.Time.UnixNano()
			if k.seq != 0 && r.Offset >= from {
				l.durable.prods.set(k.producer, prodMark{Seq: k.seq, Offset: r.Offset, Time: t})
				l.durable.dirty = true
			}
			if k.msgID != "" {
				if t >= windowStart {
					l.dd.ids.add(k.msgID, r.Offset, t)
				}
				if r.Offset >= from && t > l.durable.idTime {
					l.durable.idTime, l.durable.dirty = t, true
				}
			}
			return nil
		})
		var ce *CorruptError
		if errors.As(err, &ce) {
			// Damage in an older segment fails its reads, not Open: the
			// state misses what the damaged part held.
			l.log.Error("deduplication state not rebuilt from damaged records", "offset", o, "to", nx, "err", err)
		} else if err != nil {
			return fmt.Errorf("spool: rebuild deduplication state: %w", err)
		}
		o = nx
	}
	l.dd.prods = l.durable.prods.clone()
	if scanned > 0 || start < next {
		l.log.Info("deduplication state rebuilt", "offset", start, "to", next, "records", scanned,
			"producers", len(l.durable.prods.m), "ids", len(l.dd.ids.m))
	}
	return nil
}

// quarantineFile moves a damaged state file of the directory to quarantine/.
func (l *Log) quarantineFile(name string) error {
	qdir := filepath.Join(l.cfg.Dir, "quarantine")
	if err := os.MkdirAll(qdir, 0o755); err != nil {
		return fmt.Errorf("spool: create quarantine: %w", err)
	}
	dst := filepath.Join(qdir, fmt.Sprintf("%s.damaged-%d", name, time.Now().UnixNano()))
	if err := os.Rename(filepath.Join(l.cfg.Dir, name), dst); err != nil {
		return fmt.Errorf("spool: quarantine %s: %w", name, err)
	}
	if err := fsyncDir(qdir); err != nil {
		return err
	}
	return fsyncDir(l.cfg.Dir)
}

// writeDedup replaces dir's dedup.json durably.
func writeDedup(dir string, f dedupFile) error {
	if err := fsutil.WriteVersionedJSON(filepath.Join(dir, dedupFileName), dedupVersion, f, 0o644); err != nil {
		return fmt.Errorf("spool: write deduplication state: %w", err)
	}
	return nil
}
