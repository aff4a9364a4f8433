package spool

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// readGaps reads the gap markers Repair left in quarantine/: from -> to.
func readGaps(dir string) map[uint64]uint64 {
	gaps := map[uint64]uint64{}
	ents, err := os.ReadDir(filepath.Join(dir, "quarantine"))
	if err != nil {
		return gaps
	}
	for _, e := range ents {
		n, ok := strings.CutSuffix(e.Name(), ".gap")
		if !ok {
			continue
		}
		a, b, ok := strings.Cut(n, "-")
		if !ok {
			continue
		}
		from, err1 := strconv.ParseUint(a, 10, 64)
		to, err2 := strconv.ParseUint(b, 10, 64)
		if err1 == nil && err2 == nil && to > from {
			gaps[from] = max(gaps[from], to)
		}
	}
	return gaps
}

// gapCovered reports whether markers cover [from, to) end to end.
func gapCovered(gaps map[uint64]uint64, from, to uint64) bool {
	for i := 0; from < to && i <= len(gaps); i++ {
		nx, ok := gaps[from]
		if !ok {
			return false
		}
		from = nx
	}
	return from == to
}

func gapRecorded(dir string, from, to uint64) bool {
	return to > from && gapCovered(readGaps(dir), from, to)
}

// Removed is a range of offsets that Repair removed from the log.
type Removed struct {
	From, To uint64 // offsets [From, To); To == From when the count is unknown (end of the log)
	Pos      int64  // byte position of the removed bytes in the original segment
	Bytes    int64  // bytes removed
}

// RepairAction is one damaged segment, or one break between two segments,
// that Repair dealt with.
type RepairAction struct {
	Segment     string    // segment file name
	Quarantined string    // where the original segment was kept, relative to the directory; empty when nothing was moved (a gap between segments)
	Reason      string    // the first damage found
	Removed     []Removed // every removed range, in offset order
	Kept        []string  // segment files now holding the valid batches that followed damage
	BytesCut    int64
}

// RepairReport lists what Repair removed, and what it did to the log's
// identity and epochs (see "Identity and epochs" in the package documentation).
type RepairReport struct {
	Actions []RepairAction
	// Lost: acknowledged offsets found missing at the end of the log (the
	// data ended below the recovery checkpoint: a zero-filled or cut tail).
	Lost []Removed
	// MetaQuarantined: a damaged meta.json was moved here (relative to the
	// directory) and the log got a new identity (NewID).
	MetaQuarantined string
	NewID           bool
	// NewEpoch: Repair removed or found missing records, so a new epoch,
	// Epoch, starts at EpochStart, the log's end. Epoch and EpochStart are
	// the log's current epoch in any case (0, 0 without meta.json).
	NewEpoch   bool
	Epoch      uint32
	EpochStart uint64
}

// Changed reports whether Repair changed anything.
func (r RepairReport) Changed() bool {
	return len(r.Actions) > 0 || len(r.Lost) > 0 || r.MetaQuarantined != "" || r.NewEpoch
}

// Repair takes the directory lock (ErrLocked while a writer has it) and
// checks every segment like Verify. For each damaged segment it moves the
// original to quarantine/, keeps the valid prefix in place and writes every
// later stretch of valid batches (found by resynchronising after the damage)
// to a new segment file named by its first offset; only damaged batches are
// removed. Zeros that end a segment which is not the last, where records
// belong, are damage like any other. Then it makes the segments follow each
// other: offsets missing between two segments (a segment deleted, or one cut
// at a batch boundary) are recorded as a gap, and a segment that overlaps the
// one before it is moved to quarantine/ (its batches past the end of that
// one kept in a new segment). Offsets removed or missing in the middle of
// the log are recorded as gap markers in quarantine/ so that Open accepts
// the gaps. Offsets lost at the very end of the log are handed out again by
// the next Append, in a new epoch: whenever anything was removed, or
// acknowledged records are missing at the end (below the recovery
// checkpoint), Repair starts a new epoch at the log's end in meta.json (see
// repairMeta). Afterwards Open accepts the directory and Verify finds it
// clean. The report says exactly which offsets and bytes were removed. A
// directory that is no spool gives an error matching ErrNotSpool. logger
// may be nil.
func Repair(dir string, logger *slog.Logger) (RepairReport, error) {
	var rep RepairReport
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "spool", "dir", dir)
	if err := checkSpoolDir(dir); err != nil {
		return rep, err
	}
	lock, err := lockFile(filepath.Join(dir, "LOCK"))
	if err != nil {
		return rep, err
	}
	defer lock.Close()
	bases, err := listSegments(dir)
	if err != nil {
		return rep, fmt.Errorf("spool: list segments: %w", err)
	}
	qdir := filepath.Join(dir, "quarantine")
	for i, base := range bases {
		last := i == len(bases)-1
		var next uint64
		if !last {
			next = bases[i+1]
		}
		c, err := checkSegment(dir, base, next, last)
		if err != nil {
			return rep, err
		}
		if len(c.damage) == 0 {
			continue
		}
		if err := os.MkdirAll(qdir, 0o755); err != nil {
			return rep, fmt.Errorf("spool: create quarantine: %w", err)
		}
		a, err := repairSegment(dir, c, i == len(bases)-1, bases, i)
		if err != nil {
			return rep, err
		}
		for _, r := range a.Removed {
			logger.Warn("damaged data removed", "segment", c.name, "offset", r.From, "to", r.To,
				"pos", r.Pos, "bytes", r.Bytes, "reason", a.Reason)
		}
		rep.Actions = append(rep.Actions, a)
	}
	acts, err := repairChain(dir, logger)
	rep.Actions = append(rep.Actions, acts...)
	if err != nil {
		return rep, err
	}
	return rep, repairMeta(dir, logger, &rep)
}

// repairChain makes the segments follow each other as Open requires, once
// each segment is sound: offsets missing between two segments (a segment
// deleted, or one cut at a batch boundary) are recorded with a gap marker,
// and a segment whose offsets the one before it already holds is moved to
// quarantine/, its batches past the end of that one kept in a segment of
// their own.
func repairChain(dir string, logger *slog.Logger) ([]RepairAction, error) {
	var acts []RepairAction
	bases, err := listSegments(dir)
	if err != nil {
		return acts, fmt.Errorf("spool: list segments: %w", err)
	}
	qdir := filepath.Join(dir, "quarantine")
	var prevEnd uint64
	for i, base := range bases {
		end, err := segmentEnd(dir, base)
		if err != nil {
			return acts, err
		}
		if i == 0 || base == prevEnd || gapCovered(readGaps(dir), prevEnd, base) {
			prevEnd = end
			continue
		}
		name := segName(base)
		a := RepairAction{Segment: name,
			Reason: fmt.Sprintf("segment starts at offset %d but the previous one ends at %d", base, prevEnd)}
		if err := os.MkdirAll(qdir, 0o755); err != nil {
			return acts, fmt.Errorf("spool: create quarantine: %w", err)
		}
		if base > prevEnd {
			a.Removed = []Removed{{From: prevEnd, To: base}}
			marker := filepath.Join(qdir, fmt.Sprintf("%020d-%020d.gap", prevEnd, base))
			if err := writeSynced(marker, []byte(a.Reason+"\n")); err != nil {
				return acts, err
			}
			logger.Warn("missing offsets recorded as a gap", "segment", name, "offset", prevEnd, "to", base, "reason", a.Reason)
			prevEnd = end
		} else {
			// The segment before holds its offsets below prevEnd: move it
			// aside and keep its batches from prevEnd on, if it has any.
			path := filepath.Join(dir, name)
			data, err := os.ReadFile(path)
			if err != nil {
				return acts, fmt.Errorf("spool: read segment: %w", err)
			}
			a.Quarantined = filepath.Join("quarantine", fmt.Sprintf("%s.damaged-%d", name, time.Now().UnixNano()))
			if err := os.Rename(path, filepath.Join(dir, a.Quarantined)); err != nil {
				return acts, fmt.Errorf("spool: quarantine segment: %w", err)
			}
			logger.Warn("overlapping segment moved aside", "segment", name, "offset", base, "reason", a.Reason)
			start, stop, from, ok := batchesFrom(data, prevEnd)
			kname := segName(from)
			if _, err := os.Stat(filepath.Join(dir, kname)); ok && os.IsNotExist(err) {
				var hb [segHeaderLen]byte
				encodeSegHeader(hb[:], from, time.Now().UnixNano())
				if err := rewriteFile(filepath.Join(dir, kname), hb[:], data[start:stop]); err != nil {
					return acts, err
				}
				a.Kept = []string{kname}
				if from > prevEnd { // inside a batch that began below prevEnd
					a.Removed = []Removed{{From: prevEnd, To: from, Pos: int64(start)}}
					marker := filepath.Join(qdir, fmt.Sprintf("%020d-%020d.gap", prevEnd, from))
					if err := writeSynced(marker, []byte(a.Reason+"\n")); err != nil {
						return acts, err
					}
				}
				prevEnd = end
			}
		}
		acts = append(acts, a)
		if err := fsyncDir(qdir); err != nil {
			return acts, err
		}
		if err := fsyncDir(dir); err != nil {
			return acts, err
		}
	}
	return acts, nil
}

// batchesFrom finds, in a sound segment's bytes, the batches whose base
// offset is at or after from: data[start:stop] holds them, from first.
func batchesFrom(data []byte, from uint64) (start, stop int, first uint64, ok bool) {
	for pos := segHeaderLen; pos+batchHeaderLen <= len(data); {
		h := parseBatchHeader(data[pos:])
		if checkBatchHeader(h, verifyMaxBatch) != "" || int(h.Len) > len(data)-pos {
			break
		}
		if !ok && h.Base >= from {
			start, first, ok = pos, h.Base, true
		}
		pos += int(h.Len)
		stop = pos
	}
	return start, stop, first, ok
}

// segmentEnd returns the offset after the last batch of a sound segment,
// reading batch headers only.
func segmentEnd(dir string, base uint64) (uint64, error) {
	name := segName(base)
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return 0, fmt.Errorf("spool: open segment: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("spool: stat segment: %w", err)
	}
	res, err := scanSegment(f, name, segHeaderLen, fi.Size(), base, false, verifyMaxBatch)
	return res.next, err
}

func repairSegment(dir string, c segCheck, last bool, bases []uint64, i int) (RepairAction, error) {
	qdir := filepath.Join(dir, "quarantine")
	a := RepairAction{Segment: c.name, Reason: c.damage[0].Reason,
		Quarantined: filepath.Join("quarantine", fmt.Sprintf("%s.damaged-%d", c.name, time.Now().UnixNano()))}
	path := filepath.Join(dir, c.name)
	runs := c.runs
	prefix := len(runs) > 0 && runs[0].pos == segHeaderLen && !c.headerBad
	// Keep the original aside, then replace it by its valid prefix (or remove it).
	if prefix {
		if err := os.Link(path, filepath.Join(dir, a.Quarantined)); err != nil {
			return a, fmt.Errorf("spool: quarantine segment: %w", err)
		}
		if err := rewriteFile(path, c.data[:segHeaderLen], c.data[segHeaderLen:runs[0].end]); err != nil {
			return a, err
		}
	} else if err := os.Rename(path, filepath.Join(dir, a.Quarantined)); err != nil {
		return a, fmt.Errorf("spool: quarantine segment: %w", err)
	}
	// Valid stretches after damage become segments of their own.
	kept := runs
	if prefix {
		kept = runs[1:]
	}
	var next uint64 = math.MaxUint64
	if !last {
		next = bases[i+1]
	}
	var keptRuns []validRun
	if prefix {
		keptRuns = append(keptRuns, runs[0])
	}
	for _, r := range kept {
		name := segName(r.first)
		if r.after > next {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			continue // would clash with an existing segment: leave it removed
		}
		var hb [segHeaderLen]byte
		encodeSegHeader(hb[:], r.first, time.Now().UnixNano())
		if err := rewriteFile(filepath.Join(dir, name), hb[:], c.data[r.pos:r.end]); err != nil {
			return a, err
		}
		a.Kept = append(a.Kept, name)
		keptRuns = append(keptRuns, r)
	}
	// What was removed: everything between kept stretches, and after the last one.
	from, pos := c.base, int64(0)
	if prefix {
		from, pos = runs[0].after, runs[0].end
	}
	for _, r := range keptRuns {
		if prefix && r == runs[0] {
			continue
		}
		a.Removed = append(a.Removed, Removed{From: from, To: r.first, Pos: pos, Bytes: r.pos - pos})
		from, pos = r.after, r.end
	}
	if pos < c.size {
		to := from
		if !last {
			to = next
		}
		a.Removed = append(a.Removed, Removed{From: from, To: to, Pos: pos, Bytes: c.size - pos})
	} else if !last && from < next {
		a.Removed = append(a.Removed, Removed{From: from, To: next, Pos: pos})
	}
	for _, r := range a.Removed {
		a.BytesCut += r.Bytes
		if r.To > r.From {
			marker := filepath.Join(qdir, fmt.Sprintf("%020d-%020d.gap", r.From, r.To))
			if err := writeSynced(marker, []byte(a.Reason+"\n")); err != nil {
				return a, err
			}
		}
	}
	if err := fsyncDir(qdir); err != nil {
		return a, err
	}
	return a, fsyncDir(dir)
}

// rewriteFile replaces path by head+body: temp file, fsync, rename (the
// caller fsyncs the directory).
func rewriteFile(path string, head, body []byte) error {
	tmp := path + ".repair"
	err := writeSynced(tmp, append(append([]byte(nil), head...), body...))
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("spool: repair: %w", err)
	}
	return nil
}

// writeSynced writes a new file and fsyncs it (not its directory).
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("spool: write %s: %w", filepath.Base(path), err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("spool: write %s: %w", filepath.Base(path), err)
	}
	return nil
}
