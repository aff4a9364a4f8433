package spool

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/fastmq/fastmq/internal/fsutil"
)

// batchIdx is the in-memory index entry of one stored batch.
type batchIdx struct {
	base   uint64
	pos    int64
	size   uint32
	count  uint32
	minTs  int64
	maxTs  int64
	cumMax int64 // largest record time in the log up to and including this batch
	codec  Codec
}

func (b *batchIdx) end() uint64 { return b.base + uint64(b.count) }

// segment is one segment file and its index of published batches.
type segment struct {
	base    uint64
	name    string // base name
	path    string
	f       *os.File
	size    int64  // bytes of the header and the published batches
	end     uint64 // offset after the last published batch
	maxTs   int64
	created int64
	batches []batchIdx
	zeroTo  int64 // read-only Log: [size, zeroTo) held only zeros at the last look
}

func segName(base uint64) string { return fmt.Sprintf("%020d%s", base, segSuffix) }

// listSegments returns the bases of the segment files in dir, sorted.
func listSegments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []uint64
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, segSuffix) || e.IsDir() {
			continue
		}
		b, err := strconv.ParseUint(strings.TrimSuffix(n, segSuffix), 10, 64)
		if err != nil || len(n) != 20+len(segSuffix) {
			continue
		}
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// checkSpoolDir returns an error matching ErrNotSpool unless dir holds a
// segment file, the LOCK file or quarantine/: a spool's writer creates the
// lock and a segment as it opens the directory.
func checkSpoolDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("spool: read directory: %w", err)
	}
	for _, e := range ents {
		if n := e.Name(); n == "LOCK" || n == "quarantine" || n == metaFileName || strings.HasSuffix(n, segSuffix) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s holds no segment files", ErrNotSpool, dir)
}

// scanResult is what a segment scan found.
type scanResult struct {
	batches []batchIdx
	end     int64         // end of the last valid batch
	next    uint64        // offset after the last valid batch
	bad     *CorruptError // first invalid batch, nil if the scan reached the file end
}

// scanSegment reads the batches of f from pos (a position after the header,
// where offset next is expected) to size. With full it verifies every batch's
// checksum; otherwise it reads headers only.
func scanSegment(f *os.File, name string, pos, size int64, next uint64, full bool, maxBatch int) (scanResult, error) {
	res := scanResult{end: pos, next: next}
	w := window{f: f, size: size}
	for pos < size {
		bad := func(reason string) (scanResult, error) {
			res.bad = &CorruptError{Segment: name, Pos: pos, Offset: next, Reason: reason}
			return res, nil
		}
		if size-pos < batchHeaderLen {
			return bad(fmt.Sprintf("truncated batch header (%d bytes)", size-pos))
		}
		hb, err := w.at(pos, batchHeaderLen)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return bad("file shrank while reading")
			}
			return res, fmt.Errorf("spool: read segment %s: %w", name, err)
		}
		h := parseBatchHeader(hb)
		if r := checkBatchHeader(h, maxBatch); r != "" {
			return bad(r)
		}
		if int64(h.Len) > size-pos {
			return bad(fmt.Sprintf("truncated batch (%d of %d bytes)", size-pos, h.Len))
		}
		if h.Base != next {
			return bad(fmt.Sprintf("batch base offset %d, expected %d", h.Base, next))
		}
		if full {
			b, err := w.at(pos, int(h.Len))
			if err != nil {
				if errors.Is(err, io.EOF) {
					return bad("file shrank while reading")
				}
				return res, fmt.Errorf("spool: read segment %s: %w", name, err)
			}
			if crc(b[8:]) != h.CRC {
				return bad("batch checksum mismatch")
			}
		}
		res.batches = append(res.batches, batchIdx{base: h.Base, pos: pos, size: h.Len, count: h.Count,
			minTs: h.MinTime, maxTs: h.MaxTime, codec: h.Codec})
		pos += int64(h.Len)
		next += uint64(h.Count)
		res.end, res.next = pos, next
	}
	return res, nil
}

// nextBatch is the package's one resynchronising scanner: after damage it
// finds the first position at or after from in data where a valid batch
// starts: a plausible header (version, codec, lengths within data and
// maxBatch), a base offset at or after expect and at most maxSkip past it,
// and a matching checksum. Recovery uses it (findValidAfter) to tell a torn
// tail, which nothing valid follows, from damage in the middle; Verify and
// Repair use it (checkSegment) to find every damaged region and the valid
// batches between them.
func nextBatch(data []byte, from int, expect, maxSkip uint64, maxBatch int) (int, bool) {
	for q := max(from, 0); q+batchHeaderLen <= len(data); q++ {
		if data[q+8] != batchVersion || data[q+9] > byte(CodecZstd) {
			continue
		}
		h := parseBatchHeader(data[q:])
		if h.Base < expect || h.Base-expect > maxSkip || int(h.Len) > len(data)-q {
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

// window reads a file through a buffer of at least 64 KiB, so that scanning
// small batches takes few reads and skipping big ones reads only their headers.
type window struct {
	f     *os.File
	size  int64
	buf   []byte
	start int64 // file position of buf[0]
}

// at returns n bytes at file position pos; the slice is valid until the next call.
func (w *window) at(pos int64, n int) ([]byte, error) {
	if pos >= w.start && pos+int64(n) <= w.start+int64(len(w.buf)) {
		return w.buf[pos-w.start : pos-w.start+int64(n)], nil
	}
	want := max(n, 64<<10)
	if rest := w.size - pos; int64(want) > rest {
		want = int(max(rest, int64(n)))
	}
	if cap(w.buf) < want {
		w.buf = make([]byte, want)
	}
	w.buf = w.buf[:want]
	m, err := w.f.ReadAt(w.buf, pos)
	w.start = pos
	w.buf = w.buf[:m]
	if m < n {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, err
	}
	return w.buf[:n], nil
}

// renamedInErr makes the file errors in err that name from name to
// instead, and returns err.
func renamedInErr(err error, from, to string) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if pe, ok := e.(*os.PathError); ok && pe.Path == from {
			pe.Path = to
		}
	}
	return err
}

// fsyncDir fsyncs a directory so that creates, renames and deletes in it are durable.
func fsyncDir(dir string) error {
	if err := fsutil.SyncDir(dir); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	return nil
}

func fdatasync(f *os.File) error {
	if err := fsutil.Datasync(f); err != nil {
		return fmt.Errorf("spool: fdatasync %s: %w", filepath.Base(f.Name()), err)
	}
	return nil
}

// lockFile takes an exclusive, non-blocking flock on path and writes our pid.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("spool: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := io.ReadAll(io.LimitReader(f, 32))
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := strings.TrimSpace(string(b))
			if holder == "" {
				holder = "unknown"
			}
			return nil, fmt.Errorf("%w: %s is held by pid %s", ErrLocked, path, holder)
		}
		return nil, fmt.Errorf("spool: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// zeroFrom reports whether f holds only zeros in [from, size).
func zeroFrom(f *os.File, from, size int64) (bool, error) {
	buf := make([]byte, 64<<10)
	for from < size {
		n := min(int64(len(buf)), size-from)
		if _, err := f.ReadAt(buf[:n], from); err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
		if !fsutil.AllZero(buf[:n]) {
			return false, nil
		}
		from += n
	}
	return true, nil
}
