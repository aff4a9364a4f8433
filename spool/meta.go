package spool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fastmq/fastmq/internal/fsutil"
	"github.com/google/uuid"
)

// metaFileName is the state file of a stream directory: identity, epoch
// history and recovery checkpoint (see "Identity and epochs" in the package
// documentation).
const metaFileName = "meta.json"

// metaVersion is the format version of meta.json this package writes and
// the newest it reads.
const metaVersion = 1

// Epoch is one entry of a log's epoch history: epoch Epoch starts at offset
// Start (see "Identity and epochs" in the package documentation).
type Epoch struct {
	Epoch uint32 `json:"epoch"`
	Start uint64 `json:"start"`
}

// meta is the content of meta.json.
type meta struct {
	ID     uuid.UUID `json:"id"`
	Epochs []Epoch   `json:"epochs"`
	Acked  uint64    `json:"acked"` // recovery checkpoint: every offset below it was acknowledged
	Open   bool      `json:"open"`  // a writer has the log open; false once it closed cleanly
}

// current returns the last epoch entry (epoch 0 at offset 0 for an empty history).
func (m *meta) current() Epoch {
	if len(m.Epochs) == 0 {
		return Epoch{}
	}
	return m.Epochs[len(m.Epochs)-1]
}

// bump starts a new epoch at offset start: entries that start at or after
// it are dropped first, since the records they named are gone.
func (m *meta) bump(start uint64) Epoch {
	e := Epoch{Epoch: m.current().Epoch + 1, Start: start}
	if len(m.Epochs) == 0 {
		e.Epoch = 1
	}
	k := len(m.Epochs)
	for k > 0 && m.Epochs[k-1].Start >= start {
		k--
	}
	m.Epochs = append(m.Epochs[:k], e)
	return e
}

// epochEnd returns where epoch e ended: the start of the first later entry,
// or next for the current epoch. ok is false for an epoch after the current one.
func (m *meta) epochEnd(e uint32, next uint64) (uint64, bool) {
	cur := m.current()
	if e > cur.Epoch {
		return 0, false
	}
	for _, x := range m.Epochs {
		if x.Epoch > e {
			return x.Start, true
		}
	}
	return next, true
}

// epochOf returns the epoch of the record at offset o: the last entry that
// starts at or before it (the first entry for an offset before every start).
func (m *meta) epochOf(o uint64) uint32 {
	if len(m.Epochs) == 0 {
		return 0
	}
	e := m.Epochs[0].Epoch
	for _, x := range m.Epochs {
		if x.Start > o {
			break
		}
		e = x.Epoch
	}
	return e
}

// check validates a decoded meta.json.
func (m *meta) check() string {
	if m.ID == (uuid.UUID{}) {
		return "no identity"
	}
	if len(m.Epochs) == 0 {
		return "no epochs"
	}
	for i := 1; i < len(m.Epochs); i++ {
		if m.Epochs[i].Epoch <= m.Epochs[i-1].Epoch || m.Epochs[i].Start < m.Epochs[i-1].Start {
			return fmt.Sprintf("epoch history out of order at entry %d", i)
		}
	}
	return ""
}

// MetaError reports a meta.json that cannot be used: it does not decode, or
// its content is inconsistent. It matches ErrCorrupt. The file is never
// replaced in silence: Repair moves it to quarantine/ and gives the log a new
// identity.
type MetaError struct {
	File   string // path of the file
	Reason string
}

// Error names the file, the problem and what to do.
func (e *MetaError) Error() string {
	return fmt.Sprintf("spool: state file %s is damaged (%s): restore it from a backup, or run repair, which keeps it in quarantine/ and gives the log a new identity (consumers then start over as on a new log)", e.File, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *MetaError) Is(target error) bool { return target == ErrCorrupt }

// readMeta reads dir's meta.json. A missing file gives ok false and no error.
func readMeta(dir string) (m meta, ok bool, err error) {
	name := filepath.Join(dir, metaFileName)
	b, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("spool: read %s: %w", name, err)
	}
	v, err := fsutil.DecodeVersionedJSON(b, metaVersion, &m)
	if errors.Is(err, fsutil.ErrUnknownVersion) {
		return m, false, fmt.Errorf("%w: state file %s has format version %d; this build reads versions up to %d",
			ErrUnsupportedVersion, name, v, metaVersion)
	}
	if err == nil && v == 0 {
		err = errors.New("no version")
	}
	if err != nil {
		return m, false, &MetaError{File: name, Reason: err.Error()}
	}
	if why := m.check(); why != "" {
		return m, false, &MetaError{File: name, Reason: why}
	}
	return m, true, nil
}

// writeMeta replaces dir's meta.json durably.
func writeMeta(dir string, m meta) error {
	if err := fsutil.WriteVersionedJSON(filepath.Join(dir, metaFileName), metaVersion, m, 0o644); err != nil {
		return fmt.Errorf("spool: write state file: %w", err)
	}
	return nil
}

// newMeta returns the state of a log that has none yet: a new identity and
// epoch 0 starting at oldest.
func newMeta(oldest uint64) meta {
	return meta{ID: uuid.New(), Epochs: []Epoch{{Epoch: 0, Start: oldest}}}
}

// RecoveryReport says what Open found and did before handing out offsets.
type RecoveryReport struct {
	// TornFrom and TornBytes describe a torn or damaged tail that recovery
	// cut (copied to quarantine/): the offset it began at and its size.
	// TornBytes is 0 when nothing was cut.
	TornFrom  uint64
	TornBytes int64
	// LostFrom and LostTo: acknowledged offsets [LostFrom, LostTo) that were
	// missing, because the data ended below the recovery checkpoint (a
	// zero-filled or cut tail). Equal when nothing acknowledged was lost.
	LostFrom, LostTo uint64
	// Unclean: the last writer did not close cleanly (it crashed, or a
	// write failed), so records it acknowledged after the last checkpoint
	// may be missing without a trace (a zero-filled tail): a new epoch starts.
	Unclean bool
	// NewID: the directory had no identity (a log from before meta.json, or
	// a new one) and got one.
	NewID bool
	// NewEpoch: recovery started a new epoch, Epoch, at offset EpochStart.
	NewEpoch   bool
	Epoch      uint32
	EpochStart uint64
}

// Lost returns how many acknowledged records recovery found missing.
func (r RecoveryReport) Lost() uint64 { return r.LostTo - r.LostFrom }

// openMeta reads or creates the writer's meta.json after recovery (load)
// and before any offset is handed out: it records a new epoch when recovery
// cut anything, acknowledged records are missing or the last writer did not
// close cleanly, lowers the checkpoint to the data, marks the log open, and
// writes the file durably.
func (l *Log) openMeta() error {
	m, ok, err := readMeta(l.cfg.Dir)
	if err != nil {
		return err
	}
	next, oldest := l.next, l.oldestLocked()
	if !ok {
		m = newMeta(oldest)
		l.rec.NewID = true
	}
	if m.Acked > next {
		l.rec.LostFrom, l.rec.LostTo = next, m.Acked
		l.log.Error("acknowledged records lost: the data ends below the recovery checkpoint",
			"offset", next, "to", m.Acked, "records", m.Acked-next)
		m.Acked = next
	}
	l.rec.Unclean = ok && m.Open
	if l.rec.TornBytes > 0 || l.rec.Lost() > 0 || l.rec.Unclean {
		e := m.bump(next)
		l.rec.NewEpoch, l.rec.Epoch, l.rec.EpochStart = true, e.Epoch, e.Start
		l.log.Warn("new epoch", "epoch", e.Epoch, "offset", e.Start, "unclean", l.rec.Unclean)
	} else {
		l.rec.Epoch, l.rec.EpochStart = m.current().Epoch, m.current().Start
	}
	m.Open = true // until a clean Close
	if err := writeMeta(l.cfg.Dir, m); err != nil {
		return err
	}
	l.meta = m
	return nil
}

// loadMetaRO reads meta.json for a read-only Log (l.metaMu held, or the Log
// not yet shared), again whenever the file was replaced. A directory without
// one has the zero id and epoch 0 from offset 0.
func (l *Log) loadMetaRO() error {
	name := filepath.Join(l.cfg.Dir, metaFileName)
	fi, err := os.Stat(name)
	if os.IsNotExist(err) {
		l.meta, l.metaFI = meta{}, nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("spool: stat %s: %w", name, err)
	}
	if l.metaFI != nil && os.SameFile(fi, l.metaFI) && fi.ModTime().Equal(l.metaFI.ModTime()) && fi.Size() == l.metaFI.Size() {
		return nil
	}
	m, ok, err := readMeta(l.cfg.Dir)
	if err != nil {
		return err
	}
	if !ok {
		m = meta{}
	}
	l.meta, l.metaFI = m, fi
	return nil
}

// metaNow returns the current state (l.metaMu held): a read-only Log first
// picks up a replaced meta.json, keeping what it had if that fails.
func (l *Log) metaNow() *meta {
	if l.readOnly {
		if err := l.loadMetaRO(); err != nil {
			l.log.Warn("state file unreadable; keeping the last one read", "err", err)
		}
	}
	return &l.meta
}

// ID returns the log's identity, created with the log and never changed. A
// read-only Log of a directory from before identities returns the zero UUID.
func (l *Log) ID() uuid.UUID {
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	return l.metaNow().ID
}

// Epoch returns the current epoch and the offset it started at: every
// record appended from now on belongs to it.
func (l *Log) Epoch() (epoch uint32, start uint64) {
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	e := l.metaNow().current()
	return e.Epoch, e.Start
}

// EpochEnd returns the offset where epoch ended: the start of the first
// later epoch, or NextOffset for the current epoch. ok is false for an epoch
// this log has not reached (a position from another log, or damage). A
// consumer at offset o in epoch e with EpochEnd(e) = x < o read records
// [x, o) that are gone: it must continue at x, in EpochOf(x).
func (l *Log) EpochEnd(epoch uint32) (end uint64, ok bool) {
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	m := l.metaNow()
	return m.epochEnd(epoch, l.NextOffset())
}

// EpochOf returns the epoch of the record at offset o (the current epoch for
// offsets at or after NextOffset). A pull server stamps a reply with the
// epoch of its first record and ends it at that epoch's end, so that every
// record of a reply belongs to one epoch.
func (l *Log) EpochOf(o uint64) uint32 {
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	return l.metaNow().epochOf(o)
}

// Epochs returns a copy of the epoch history, oldest first. The caller owns it.
func (l *Log) Epochs() []Epoch {
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	m := l.metaNow()
	if len(m.Epochs) == 0 {
		return []Epoch{{}}
	}
	return append([]Epoch(nil), m.Epochs...)
}

// Recovery returns what Open's recovery found and did. It is the zero
// report for a read-only Log.
func (l *Log) Recovery() RecoveryReport { return l.rec }
