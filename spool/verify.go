package spool

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// verifyMaxBatch is the decompressed batch limit Verify and Repair accept:
// they do not know the writer's configuration, and the data is in memory.
const verifyMaxBatch = 1 << 30

// Damage is one damaged region found by Verify.
type Damage struct {
	Segment string // segment file name
	Pos     int64  // byte position of the damaged batch (0: the segment header)
	Offset  uint64 // offset of the first record that cannot be read
	Reason  string
	Tail    bool // nothing valid follows it in the last segment: a torn tail, which Open truncates
}

// String describes the damage with its segment, byte position and offset.
func (d Damage) String() string {
	s := fmt.Sprintf("segment %s byte %d offset %d: %s", d.Segment, d.Pos, d.Offset, d.Reason)
	if d.Tail {
		s += " (torn tail)"
	}
	return s
}

// Report is the result of Verify.
type Report struct {
	Segments int
	Batches  int
	Records  uint64
	Bytes    int64
	Oldest   uint64 // first offset of the first segment
	Next     uint64 // offset after the last valid record
	Damaged  []Damage
}

// Clean reports whether Verify found no damage.
func (r Report) Clean() bool { return len(r.Damaged) == 0 }

// segCheck is what checking one segment found.
type segCheck struct {
	name      string
	base      uint64
	size      int64
	headerBad bool
	damage    []Damage
	goodEnd   int64  // end of the valid prefix (position of the first damage, or size)
	goodNext  uint64 // offset after the valid prefix
	maxNext   uint64 // highest offset end seen in any valid batch, after resyncing
	batches   int
	records   uint64
	runs      []validRun // contiguous stretches of valid batches, in file order
	data      []byte
}

// validRun is a stretch of valid batches with contiguous offsets.
type validRun struct {
	pos, end     int64  // byte range in the segment
	first, after uint64 // offsets [first, after)
}

// checkSegment reads a whole segment and verifies every batch and record.
// After damage it resynchronises on the next valid batch, so that every
// damaged region is listed.
func checkSegment(dir string, base uint64) (segCheck, error) {
	name := segName(base)
	c := segCheck{name: name, base: base, goodNext: base, maxNext: base}
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return c, fmt.Errorf("spool: read segment: %w", err)
	}
	c.size = int64(len(data))
	c.data = data
	pos := segHeaderLen
	expect := base
	h, err := decodeSegHeader(data, name)
	if err == nil && h.Base != base {
		err = &CorruptError{Segment: name, Reason: fmt.Sprintf("header base offset %d does not match the file name", h.Base)}
	}
	if err != nil {
		c.headerBad = true
		c.damage = append(c.damage, Damage{Segment: name, Offset: base, Reason: strings.TrimPrefix(err.Error(), "spool: ")})
		q, ok := findValidIn(data, 0, base, verifyMaxBatch)
		if !ok {
			c.damage[0].Tail = true
			return c, nil
		}
		pos = q
		expect = parseBatchHeader(data[q:]).Base
	}
	inPrefix := !c.headerBad
	for pos < len(data) {
		n, cnt, why := checkBatchAt(data, pos, expect)
		if why != "" && allZero(data[pos:]) {
			break // preallocated space
		}
		if why != "" {
			d := Damage{Segment: name, Pos: int64(pos), Offset: expect, Reason: why}
			if inPrefix {
				c.goodEnd, c.goodNext, inPrefix = int64(pos), expect, false
			}
			q, ok := findValidIn(data, pos+1, expect, verifyMaxBatch)
			if !ok {
				d.Tail = true
				c.damage = append(c.damage, d)
				break
			}
			c.damage = append(c.damage, d)
			pos = q
			expect = parseBatchHeader(data[q:]).Base
			continue
		}
		c.batches++
		c.records += uint64(cnt)
		if k := len(c.runs) - 1; k >= 0 && c.runs[k].end == int64(pos) && c.runs[k].after == expect {
			c.runs[k].end, c.runs[k].after = int64(pos+n), expect+uint64(cnt)
		} else {
			c.runs = append(c.runs, validRun{pos: int64(pos), end: int64(pos + n), first: expect, after: expect + uint64(cnt)})
		}
		pos += n
		expect += uint64(cnt)
		c.maxNext = max(c.maxNext, expect)
	}
	if inPrefix {
		c.goodEnd, c.goodNext = int64(len(data)), expect
	}
	return c, nil
}

// checkBatchAt fully checks the batch at data[pos:]: header, checksum,
// decompression and every record.
func checkBatchAt(data []byte, pos int, expect uint64) (int, uint32, string) {
	v, n, err := openBatch(data[pos:], verifyMaxBatch, int64(pos), "", expect)
	if err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			return 0, 0, ce.Reason
		}
		return 0, 0, err.Error()
	}
	if v.h.Base != expect {
		return 0, 0, fmt.Sprintf("batch base offset %d, expected %d", v.h.Base, expect)
	}
	var r Record
	for {
		ok, err := v.next(&r, 0, "")
		if err != nil {
			var ce *CorruptError
			errors.As(err, &ce)
			return 0, 0, fmt.Sprintf("record %d: %s", ce.Offset, ce.Reason)
		}
		if !ok {
			break
		}
	}
	return n, v.h.Count, ""
}

// findValidIn finds the first position at or after from where a batch with a
// plausible header, a base at or after expect and a matching checksum starts.
func findValidIn(data []byte, from int, expect uint64, maxBatch int) (int, bool) {
	for q := max(from, 0); q+batchHeaderLen <= len(data); q++ {
		if data[q+8] != batchVersion || data[q+9] > byte(CodecZstd) {
			continue
		}
		h := parseBatchHeader(data[q:])
		if h.Base < expect || h.Base-expect > uint64(len(data)) || int(h.Len) > len(data)-q {
			continue
		}
		if checkBatchHeader(h, maxBatch) != "" {
			continue
		}
		if crc(data[q+8:q+int(h.Len)]) == h.CRC {
			return q, true
		}
	}
	return 0, false
}

// Verify reads every segment in dir and checks every batch (checksum,
// decompression, records, offsets) and the continuity between segments. It
// does not take the lock and changes nothing. The error is for I/O failures
// only; damage is listed in Report.Damaged, each with segment, byte position
// and offset. Run against a directory with an active writer, the last batch
// may show as a torn tail while it is being written.
func Verify(dir string) (Report, error) {
	var rep Report
	bases, err := listSegments(dir)
	if err != nil {
		return rep, fmt.Errorf("spool: list segments: %w", err)
	}
	gaps := readGaps(dir)
	for i, base := range bases {
		c, err := checkSegment(dir, base)
		if err != nil {
			return rep, err
		}
		if i == 0 {
			rep.Oldest = base
		} else if base != rep.Next && !gapCovered(gaps, rep.Next, base) {
			rep.Damaged = append(rep.Damaged, Damage{Segment: c.name, Offset: rep.Next,
				Reason: fmt.Sprintf("segment starts at offset %d but the previous one ends at %d", base, rep.Next)})
		}
		last := i == len(bases)-1
		for _, d := range c.damage {
			if !last {
				d.Tail = false
			}
			rep.Damaged = append(rep.Damaged, d)
		}
		rep.Segments++
		rep.Batches += c.batches
		rep.Records += c.records
		rep.Bytes += c.size
		rep.Next = max(c.goodNext, c.maxNext)
	}
	return rep, nil
}

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

// RepairAction is one damaged segment that Repair dealt with.
type RepairAction struct {
	Segment     string    // segment file name
	Quarantined string    // where the original segment was kept, relative to the directory
	Reason      string    // the first damage found
	Removed     []Removed // every removed range, in offset order
	Kept        []string  // segment files now holding the valid batches that followed damage
	BytesCut    int64
}

// RepairReport lists what Repair removed.
type RepairReport struct {
	Actions []RepairAction
}

// Repair takes the directory lock (ErrLocked while a writer has it) and
// checks every segment like Verify. For each damaged segment it moves the
// original to quarantine/, keeps the valid prefix in place and writes every
// later stretch of valid batches (found by resynchronising after the damage)
// to a new segment file named by its first offset; only damaged batches are
// removed. Offsets removed in the middle of the log are recorded as gap
// markers in quarantine/ so that Open accepts the gaps; offsets lost at the
// very end of the log are handed out again by the next Append. The report
// says exactly which offsets and bytes were removed. logger may be nil.
func Repair(dir string, logger *slog.Logger) (RepairReport, error) {
	var rep RepairReport
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "spool", "dir", dir)
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
		c, err := checkSegment(dir, base)
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
	return rep, nil
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
