package tail

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"
)

// fileID identifies a file independently of its name.
type fileID struct{ dev, ino uint64 }

// fingerprintMax is the number of leading bytes of a file whose CRC is kept
// in the state file, to tell a reused inode number from the file we read.
const fingerprintMax = 256

// minBufSize is the initial read buffer of a file reader.
const minBufSize = 64 << 10

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// fileReader reads lines from one open file. It is owned by the goroutine
// running Tailer.Run (or by New and Close while no Run is active).
type fileReader struct {
	f    *os.File
	name string // the name it was opened under, for logs
	id   fileID

	buf     []byte
	r, w    int   // unconsumed bytes are buf[r:w]
	readOff int64 // file offset of buf[w]
	eof     bool  // the last read reached the end of the file
	idle    bool  // current file: the last visit ended at its end

	fpLen int    // number of leading bytes covered by fpCRC
	fpCRC uint32 // CRC32C of the first fpLen bytes of the file

	idleSince  time.Time // draining readers: when data last stopped coming (zero: active)
	forceClose bool      // draining readers: close at the next end of file, without grace
}

// openReader opens name and positions the reader at off.
func openReader(name string, off int64) (*fileReader, os.FileInfo, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("tail: %s: not a regular file", name)
	}
	id, _, _ := identify(fi)
	fr := &fileReader{f: f, name: name, id: id, readOff: off}
	if err := fr.refreshFingerprint(fi.Size()); err != nil {
		f.Close()
		return nil, nil, err
	}
	return fr, fi, nil
}

// emitted is the file offset just after the last line handed out.
func (fr *fileReader) emitted() int64 { return fr.readOff - int64(fr.w-fr.r) }

// pending reports whether bytes of an incomplete line are buffered.
func (fr *fileReader) pending() bool { return fr.w > fr.r }

// pos returns the reader's position for the state.
func (fr *fileReader) pos() filePos {
	return filePos{id: fr.id, off: fr.emitted(), fpLen: fr.fpLen, fpCRC: fr.fpCRC}
}

// reset restarts the reader at offset 0 (after truncation), dropping any
// buffered bytes and the fingerprint.
func (fr *fileReader) reset() {
	fr.r, fr.w, fr.readOff, fr.eof, fr.idle = 0, 0, 0, false, false
	fr.fpLen, fr.fpCRC = 0, 0
}

func (fr *fileReader) close() error { return fr.f.Close() }

// refreshFingerprint extends the fingerprint to min(size, fingerprintMax)
// bytes. It reads from the file only while the file is shorter than that.
func (fr *fileReader) refreshFingerprint(size int64) error {
	want := int(min(size, fingerprintMax))
	if want <= fr.fpLen {
		return nil
	}
	var head [fingerprintMax]byte
	n, err := fr.f.ReadAt(head[:want], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("tail: read head of %s: %w", fr.name, err)
	}
	fr.fpLen, fr.fpCRC = n, crc32.Checksum(head[:n], crcTable)
	return nil
}

// fill reads more bytes after buf[w], compacting and growing the buffer as
// needed up to limit bytes. It returns the number of bytes read; eof is set
// when the read reached the current end of the file.
func (fr *fileReader) fill(limit int) (int, error) {
	if fr.buf == nil {
		fr.buf = make([]byte, min(minBufSize, limit))
	}
	if fr.r == fr.w {
		fr.r, fr.w = 0, 0
	} else if fr.w == len(fr.buf) || fr.r > len(fr.buf)/2 {
		fr.w = copy(fr.buf, fr.buf[fr.r:fr.w])
		fr.r = 0
	}
	if fr.w == len(fr.buf) {
		if len(fr.buf) >= limit {
			return 0, nil // caller splits the line
		}
		nb := make([]byte, min(2*len(fr.buf), limit))
		copy(nb, fr.buf[:fr.w])
		fr.buf = nb
	}
	n, err := fr.f.ReadAt(fr.buf[fr.w:], fr.readOff)
	fr.w += n
	fr.readOff += int64(n)
	fr.eof = false
	if err != nil {
		if errors.Is(err, io.EOF) {
			fr.eof = true
			return n, nil
		}
		return n, fmt.Errorf("tail: read %s at offset %d: %w", fr.name, fr.readOff, err)
	}
	return n, nil
}

// nextLine returns the next line in the buffer. text excludes the newline
// and a \r before it; consumed is the number of bytes to skip. A line longer
// than maxLine is returned in maxLine pieces with split set. ok is false
// when no complete line (or full piece) is buffered.
func (fr *fileReader) nextLine(maxLine int) (text []byte, consumed int, split, ok bool) {
	avail := fr.buf[fr.r:fr.w]
	window := avail
	if len(window) > maxLine+2 {
		window = window[:maxLine+2]
	}
	if i := bytes.IndexByte(window, '\n'); i >= 0 {
		text = avail[:i]
		if len(text) > 0 && text[len(text)-1] == '\r' {
			text = text[:len(text)-1]
		}
		if len(text) <= maxLine {
			return text, i + 1, false, true
		}
		return avail[:maxLine], maxLine, true, true
	}
	if len(avail) >= maxLine+2 {
		return avail[:maxLine], maxLine, true, true
	}
	return nil, 0, false, false
}
