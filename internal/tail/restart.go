package tail

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/fastmq/fastmq/internal/fsutil"
)

// loadState reads the state file. A corrupt file is an error under
// StrictState; otherwise it is moved aside and no state is returned.
func (t *Tailer) loadState() (map[string]pathState, error) {
	if t.cfg.StateFile == "" {
		return nil, nil
	}
	data, err := os.ReadFile(t.cfg.StateFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tail: read state file: %w", err)
	}
	paths, err := decodeState(data)
	if err != nil {
		se := &StateError{File: t.cfg.StateFile, Err: err}
		if t.cfg.StrictState {
			return nil, se
		}
		aside := t.cfg.StateFile + ".corrupt"
		if rerr := os.Rename(t.cfg.StateFile, aside); rerr != nil {
			return nil, fmt.Errorf("tail: move unusable state file aside: %w (it was unusable: %v)", rerr, err)
		}
		if serr := fsutil.SyncDir(filepath.Dir(aside)); serr != nil {
			return nil, serr
		}
		se.MovedTo = aside
		t.loadErr = se
		t.log.Error("unusable state file moved aside; starting without saved positions",
			"file", t.cfg.StateFile, "moved_to", aside, "err", err)
		return nil, nil
	}
	m := make(map[string]pathState, len(paths))
	for _, ps := range paths {
		m[ps.path] = ps
	}
	return m, nil
}

// restore sets up the readers of f from its saved state (see the package
// documentation for the rules).
func (t *Tailer) restore(f *follower, ps pathState, ok bool) {
	if !ok {
		fr, fi, err := openReader(f.path, 0)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				t.problem(f, "cannot open file; will retry", err)
			}
			return
		}
		if t.cfg.StartAtEnd {
			fr.readOff = lastLineStart(fr.f, fi.Size())
		}
		f.cur = fr
		return
	}
	var curID fileID
	pfi, statErr := os.Stat(f.path)
	if statErr == nil {
		curID, _, _ = identify(pfi)
	}
	for _, fp := range ps.files {
		if f.cur == nil && statErr == nil && curID == fp.id {
			fr, fi, err := openReader(f.path, fp.off)
			if err == nil && fr.id == fp.id {
				if !t.verify(fr, fi, fp) {
					fr.readOff = 0
				}
				f.cur = fr
				continue
			}
			if err == nil {
				fr.close()
			} else {
				// Keep the position for when the file can be opened.
				t.problem(f, "cannot open file; will retry", err)
				rp := fp
				f.resume = &rp
				statErr = err
				continue
			}
		}
		name, found := findRotated(f.path, fp.id)
		if !found {
			t.log.Warn("rotated file not found after restart; its unread lines are lost",
				"path", f.path, "ino", fp.id.ino, "offset", fp.off)
			continue
		}
		fr, fi, err := openReader(name, fp.off)
		if err != nil {
			t.log.Warn("cannot open rotated file after restart; its unread lines are lost",
				"path", f.path, "file", name, "offset", fp.off, "err", err)
			continue
		}
		if fr.id != fp.id || !t.verify(fr, fi, fp) {
			fr.close()
			continue
		}
		t.log.Info("draining rotated file found after restart", "path", f.path, "file", name, "offset", fp.off)
		f.draining = append(f.draining, fr)
	}
	if f.cur == nil && statErr == nil {
		// The file at the path appeared or replaced ours while we were
		// stopped: read it from the beginning.
		fr, _, err := openReader(f.path, 0)
		if err != nil {
			t.problem(f, "cannot open file; will retry", err)
			return
		}
		f.cur = fr
	}
}

// verify checks that a reopened file is the one a saved position refers to
// (fingerprint) and is not shorter than the saved offset. It logs why not.
func (t *Tailer) verify(fr *fileReader, fi os.FileInfo, fp filePos) bool {
	if fi.Size() < fp.off {
		t.log.Warn("file shorter than its saved offset (truncated while stopped); reading from start",
			"path", fr.name, "offset", fp.off, "size", fi.Size())
		return false
	}
	if fp.fpLen > 0 {
		sum, err := headCRC(fr.f, fp.fpLen)
		if err != nil || sum != fp.fpCRC {
			t.log.Warn("file content differs from the saved fingerprint (inode reused); treating it as a new file",
				"path", fr.name, "ino", fp.id.ino, "err", err)
			return false
		}
	}
	return true
}

// lastLineStart returns where the last, incomplete line of a file of the
// given size starts (just after the last newline in its final 64 KiB), so
// that starting at the end of a file does not begin in the middle of a line
// being written. Without a newline there, it returns 0 for a file of at most
// 64 KiB (one incomplete line) and size otherwise.
func lastLineStart(f *os.File, size int64) int64 {
	n := min(size, minBufSize)
	if n == 0 {
		return size
	}
	buf := make([]byte, n)
	if got, err := f.ReadAt(buf, size-n); int64(got) != n {
		_ = err // unreadable tail: start at the end
		return size
	}
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		return size - n + int64(i) + 1
	}
	if n == size {
		return 0
	}
	return size
}

// headCRC is the CRC32C of the first n bytes of f.
func headCRC(f *os.File, n int) (uint32, error) {
	var head [fingerprintMax]byte
	got, err := f.ReadAt(head[:n], 0)
	if got < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	return crc32.Checksum(head[:n], crcTable), nil
}

// findRotated looks in the directory of path for a file named path.* or
// path-* with the given identity.
func findRotated(path string, id fileID) (string, bool) {
	if id == (fileID{}) {
		return "", false
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	d, err := os.Open(dir)
	if err != nil {
		return "", false
	}
	defer d.Close()
	entries, _ := d.ReadDir(maxRotatedScan)
	for _, e := range entries {
		name := e.Name()
		if len(name) <= len(base) || !strings.HasPrefix(name, base) {
			continue
		}
		if c := name[len(base)]; c != '.' && c != '-' {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if got, _, ok := identify(info); ok && got == id {
			return filepath.Join(dir, name), true
		}
	}
	return "", false
}
