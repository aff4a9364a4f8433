package spool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fastmq/fastmq/internal/fsutil"
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
// damaged region is listed. next is the base offset of the segment that
// follows, unless last: zeros that end a segment which is not the last are
// damage when its records stop short of next (the writer cuts a segment to
// its data before it starts the next one).
func checkSegment(dir string, base, next uint64, last bool) (segCheck, error) {
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
		q, ok := nextBatch(data, 0, base, uint64(len(data)), verifyMaxBatch)
		if !ok {
			c.damage[0].Tail = true
			return c, nil
		}
		pos = q
		expect = parseBatchHeader(data[q:]).Base
	}
	inPrefix := !c.headerBad
	zeroAt := -1
	for pos < len(data) {
		n, cnt, why := checkBatchAt(data, pos, expect)
		if why != "" && fsutil.AllZero(data[pos:]) {
			zeroAt = pos // preallocated space, or data zeroed
			break
		}
		if why != "" {
			d := Damage{Segment: name, Pos: int64(pos), Offset: expect, Reason: why}
			if inPrefix {
				c.goodEnd, c.goodNext, inPrefix = int64(pos), expect, false
			}
			q, ok := nextBatch(data, pos+1, expect, uint64(len(data)), verifyMaxBatch)
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
	if zeroAt >= 0 && !last && expect < next {
		c.damage = append(c.damage, Damage{Segment: name, Pos: int64(zeroAt), Offset: expect, Tail: true,
			Reason: fmt.Sprintf("zeros from byte %d to the end of a segment that is not the last, where offsets %d..%d belong",
				zeroAt, expect, next-1)})
		if inPrefix {
			c.goodEnd, c.goodNext, inPrefix = int64(zeroAt), expect, false
		}
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

// Verify reads every segment in dir and checks every batch (checksum,
// decompression, records, offsets) and the continuity between segments. It
// does not take the lock and changes nothing. The error is for I/O failures
// and for a directory that is no spool (ErrNotSpool) only; damage is listed
// in Report.Damaged, each with segment, byte position and offset. A
// meta.json that cannot be read, and acknowledged records missing at the
// end (the data ends below its recovery checkpoint), are damage too. Run
// against a directory with an active writer, the last batch may show as a
// torn tail while it is being written.
func Verify(dir string) (Report, error) {
	var rep Report
	if err := checkSpoolDir(dir); err != nil {
		return rep, err
	}
	mv := readMetaVerify(dir) // before the data: a running writer only raises the checkpoint
	bases, err := listSegments(dir)
	if err != nil {
		return rep, fmt.Errorf("spool: list segments: %w", err)
	}
	gaps := readGaps(dir)
	// open: the previous segment ends in damage that nothing valid follows,
	// which already reports the offsets missing up to this segment.
	open := false
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
		if i == 0 {
			rep.Oldest = base
		} else if base != rep.Next && !gapCovered(gaps, rep.Next, base) && !(open && base > rep.Next) {
			rep.Damaged = append(rep.Damaged, Damage{Segment: c.name, Offset: rep.Next,
				Reason: fmt.Sprintf("segment starts at offset %d but the previous one ends at %d", base, rep.Next)})
		}
		open = len(c.damage) > 0 && c.damage[len(c.damage)-1].Tail
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
	mv.check(dir, bases, &rep)
	return rep, nil
}
