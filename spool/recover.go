package spool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

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
		l.appendSegment(s)
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
				if !noSpace(err) {
					f.Close()
					return nil, err
				}
				// No room for the copy: the log is served all the same,
				// and the copy is made once space returns (holdTail).
				if err := l.holdTail(f, name, res.end, size, res.next, err); err != nil {
					f.Close()
					return nil, err
				}
			}
			if err := f.Truncate(res.end); err != nil {
				f.Close()
				return nil, fmt.Errorf("spool: truncate torn tail: %w", err)
			}
			if err := fdatasync(f); err != nil {
				f.Close()
				return nil, err
			}
			l.rec.TornFrom, l.rec.TornBytes = res.next, size-res.end
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
	return l.writeTornCopy(qdir, name, from, io.NewSectionReader(src, from, size-from))
}

// writeTornCopy writes a torn tail's copy into qdir and makes it durable;
// a copy it could not finish is removed.
func (l *Log) writeTornCopy(qdir, name string, from int64, r io.Reader) error {
	dpath := filepath.Join(qdir, fmt.Sprintf("%s.torn-%d-%d", name, from, time.Now().UnixNano()))
	dst, err := os.Create(dpath)
	if err != nil {
		return fmt.Errorf("spool: copy torn tail: %w", err)
	}
	_, err = io.Copy(dst, r)
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dpath)
		return fmt.Errorf("spool: copy torn tail: %w", err)
	}
	if err := fsyncDir(qdir); err != nil {
		return err
	}
	return fsyncDir(l.cfg.Dir)
}

// maxHeldTail bounds the torn tail kept in memory when the disk has no
// room for its copy (a torn tail is at most one group being written and
// the zeros ahead of it).
const maxHeldTail = 64 << 20

// heldTail is a torn tail cut without its copy, for lack of space.
type heldTail struct {
	name   string // segment
	from   int64  // byte position it began at
	offset uint64 // the offset it began at
	data   []byte
}

// holdTail keeps bytes [from, size) of f in memory when the disk had no
// room for their copy (cause), so that the segment can be cut and the log
// served: Open never needs free space. The retainer writes the copy once
// space returns (copyHeldTail); a tail too large to keep, or a process
// that ends first, loses the copy, which the log says at Error. A torn
// tail holds no acknowledged record: every acknowledged batch is whole.
func (l *Log) holdTail(f *os.File, name string, from, size int64, offset uint64, cause error) error {
	if size-from > maxHeldTail {
		l.log.Error("torn tail cut without a copy: no space for it, too large to keep", "segment", name, "offset", offset, "bytes", size-from, "err", cause)
		return nil
	}
	data := make([]byte, size-from)
	if _, err := f.ReadAt(data, from); err != nil {
		return fmt.Errorf("spool: read torn tail: %w", err)
	}
	l.held = &heldTail{name: name, from: from, offset: offset, data: data}
	l.log.Error("torn tail cut before its copy: no space for it; the copy is made once space returns", "segment", name, "offset", offset, "bytes", size-from, "err", cause)
	return nil
}

// copyHeldTail writes the copy of a torn tail that holdTail kept, if the
// disk now has room (retainer, and Close after the retainer ended).
func (l *Log) copyHeldTail(atClose bool) {
	h := l.held
	if h == nil {
		return
	}
	qdir := filepath.Join(l.cfg.Dir, "quarantine")
	err := os.MkdirAll(qdir, 0o755)
	if err == nil {
		err = l.writeTornCopy(qdir, h.name, h.from, bytes.NewReader(h.data))
	}
	switch {
	case err == nil:
		l.held = nil
		l.log.Warn("torn tail copied to quarantine", "segment", h.name, "offset", h.offset, "bytes", len(h.data))
	case atClose:
		l.log.Error("torn tail copy lost: still no space at close", "segment", h.name, "offset", h.offset, "bytes", len(h.data), "err", err)
	}
}

// findValidAfter looks for a valid batch (plausible header, matching
// checksum, base offset at or after expect) starting after position from. It
// tells torn tails (nothing valid follows) from damage in the middle.
func findValidAfter(f *os.File, from, size int64, expect uint64, maxBatch int) (int64, bool, error) {
	// When the damaged batch's own header is sound, its payload is not
	// searched: a record value may well hold a whole valid batch (a relayed
	// ReadRaw, say). Whatever follows must start after its claimed end.
	if size-from >= batchHeaderLen {
		hb := make([]byte, batchHeaderLen)
		if _, err := f.ReadAt(hb, from); err == nil {
			if h := parseBatchHeader(hb); h.Base == expect && checkBatchHeader(h, maxBatch) == "" {
				end := from + int64(h.Len)
				if end >= size {
					return 0, false, nil // it runs to the end of the file: a torn tail
				}
				from, expect = end-1, expect+uint64(h.Count)
			}
		}
	}
	if size-from-1 < batchHeaderLen {
		return 0, false, nil
	}
	buf := make([]byte, size-from-1)
	if _, err := f.ReadAt(buf, from+1); err != nil && !errors.Is(err, io.EOF) {
		return 0, false, err
	}
	if q, ok := nextBatch(buf, 0, expect, uint64(size), maxBatch); ok {
		return from + 1 + int64(q), true, nil
	}
	return 0, false, nil
}
