package tail

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// collect fills the batch from the followers, starting after the one that
// filled the previous batch. progressed reports whether anything happened
// (lines read or a file opened, closed, rotated or truncated) so that the
// caller polls again without waiting.
func (t *Tailer) collect(now time.Time) (progressed bool, err error) {
	n := len(t.fs)
	for i := 0; i < n; i++ {
		k := (t.next + i) % n
		full, p, err := t.pollPath(t.fs[k], now)
		progressed = progressed || p
		if err != nil {
			return progressed, err
		}
		if full {
			t.next = (k + 1) % n
			progressed = true
			break
		}
	}
	if len(t.batch.lines) > 0 {
		t.batch.snap = t.snapshot()
		t.dirty = false
	}
	t.polls.Add(1)
	return progressed, nil
}

// pollPath reads what is available for one path: its rotated-away files
// first, then the current file, and checks for truncation and rotation
// when the current file is at its end.
func (t *Tailer) pollPath(f *follower, now time.Time) (full, progressed bool, err error) {
	for i := 0; i < len(f.draining); {
		d := f.draining[i]
		full, got, err := t.readLines(f, d)
		if err != nil {
			return false, progressed, err
		}
		progressed = progressed || got
		if full {
			return true, progressed, nil
		}
		if got {
			d.idleSince = time.Time{}
		} else if d.idleSince.IsZero() {
			d.idleSince = now
		}
		if !d.forceClose && (d.idleSince.IsZero() || now.Sub(d.idleSince) < t.cfg.RotateGrace) {
			i++
			continue
		}
		// Finished: flush a last line without newline, then close.
		for d.pending() {
			piece := d.buf[d.r:min(d.w, d.r+t.cfg.MaxLineBytes)]
			if !t.batch.fits(len(piece)) {
				return true, progressed, nil
			}
			d.r += len(piece)
			t.batch.add(f.path, d, piece, d.pending())
			progressed = true
		}
		t.log.Info("finished rotated file", "path", f.path, "file", d.name, "ino", d.id.ino, "offset", d.emitted())
		d.close()
		f.draining = append(f.draining[:i], f.draining[i+1:]...)
		t.dirty, progressed = true, true
	}

	if f.cur == nil {
		fr, _, err := openReader(f.path, 0)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				t.problem(f, "cannot open file; will retry", err)
			}
			return false, progressed, nil
		}
		f.lastProblem = ""
		if rp := f.resume; rp != nil {
			f.resume = nil
			if fr.id == rp.id {
				fi, err := fr.f.Stat()
				if err == nil && t.verify(fr, fi, *rp) {
					fr.readOff = rp.off
				}
			}
		}
		t.log.Info("following file", "path", f.path, "ino", fr.id.ino, "offset", fr.readOff)
		f.cur = fr
		t.dirty, progressed = true, true
	}
	cur := f.cur
	if cur.idle {
		// The last visit ended at the end of the file: before reading
		// on, check that the file was not truncated (copytruncate) or
		// truncated and refilled past our offset (head changed).
		fi, err := cur.f.Stat()
		if err != nil {
			return false, progressed, fmt.Errorf("tail: stat open file %s: %w", f.path, err)
		}
		switch size := fi.Size(); {
		case size < cur.readOff:
			t.log.Warn("file truncated; reading from start", "path", f.path, "offset", cur.emitted(), "size", size)
			cur.reset()
			t.dirty = true
			return false, true, nil
		case size == cur.readOff:
			return false, progressed, t.checkRotation(f, now, &progressed)
		case cur.fpLen > 0:
			if sum, err := headCRC(cur.f, cur.fpLen); err != nil || sum != cur.fpCRC {
				t.log.Warn("file rewritten in place (truncated and refilled); reading from start",
					"path", f.path, "offset", cur.emitted(), "size", size, "err", err)
				cur.reset()
				t.dirty = true
				return false, true, nil
			}
		}
		cur.idle = false
	}
	full, got, err := t.readLines(f, cur)
	if err != nil {
		return false, progressed, err
	}
	progressed = progressed || got
	if full {
		return true, progressed, nil
	}
	cur.idle = true
	if err := cur.refreshFingerprint(cur.readOff); err != nil {
		return false, progressed, err
	}
	return false, progressed, t.checkRotation(f, now, &progressed)
}

// checkRotation looks at what the path names now: the current file still,
// nothing (removed or renamed away: retire the current file) or another
// file (rotated: retire the current file; the new one is opened on the next
// visit). It sets *progressed when something changed.
func (t *Tailer) checkRotation(f *follower, now time.Time, progressed *bool) error {
	cur := f.cur
	pfi, err := os.Stat(f.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			t.log.Info("file removed or renamed away; draining it", "path", f.path, "ino", cur.id.ino)
			t.retire(f, now)
			*progressed = true
			return nil
		}
		t.problem(f, "cannot stat path", err)
		return nil
	}
	id, _, ok := identify(pfi)
	if !ok || id == cur.id {
		return nil
	}
	t.log.Info("file rotated; draining the old one", "path", f.path, "old_ino", cur.id.ino, "ino", id.ino)
	t.retire(f, now)
	*progressed = true
	for i, d := range f.draining {
		if d.id == id { // renamed back: resume it
			f.draining = append(f.draining[:i], f.draining[i+1:]...)
			d.idleSince, d.forceClose, d.idle = time.Time{}, false, false
			f.cur = d
			break
		}
	}
	return nil
}

// retire moves the current file of f to its draining list.
func (t *Tailer) retire(f *follower, now time.Time) {
	cur := f.cur
	f.cur = nil
	cur.idleSince = now
	f.draining = append(f.draining, cur)
	for i := 0; i < len(f.draining)-maxDraining; i++ {
		if d := f.draining[i]; !d.forceClose {
			d.forceClose = true
			t.log.Warn("too many rotated files still open; closing the oldest at its end",
				"path", f.path, "file", d.name, "ino", d.id.ino)
		}
	}
	t.dirty = true
}

// readLines moves complete lines of fr into the batch until the batch is
// full (full) or fr is at its end of file.
func (t *Tailer) readLines(f *follower, fr *fileReader) (full, got bool, err error) {
	maxLine := t.cfg.MaxLineBytes
	for {
		if t.batch.full() {
			return true, got, nil
		}
		if text, consumed, split, ok := fr.nextLine(maxLine); ok {
			if !t.batch.fits(len(text)) {
				return true, got, nil
			}
			fr.r += consumed
			t.batch.add(f.path, fr, text, split)
			got = true
			continue
		}
		if fr.eof {
			fr.eof = false // data may be appended; read again next time
			return false, got, nil
		}
		n, err := fr.fill(maxLine + 2)
		if err != nil {
			return false, got, err
		}
		if n == 0 {
			fr.eof = false
			return false, got, nil
		}
	}
}

// batch accumulates lines for one callback. Text bytes are copied into an
// arena reused across batches.
type batch struct {
	lines    []Line
	ends     []int
	arena    []byte
	snap     []pathState
	maxLines int
	maxBytes int
}

func (b *batch) full() bool {
	return len(b.lines) >= b.maxLines || len(b.arena) >= b.maxBytes
}

func (b *batch) fits(n int) bool {
	return len(b.lines) < b.maxLines && (len(b.lines) == 0 || len(b.arena)+n <= b.maxBytes)
}

func (b *batch) add(path string, fr *fileReader, text []byte, split bool) {
	b.arena = append(b.arena, text...)
	b.ends = append(b.ends, len(b.arena))
	b.lines = append(b.lines, Line{
		Path:  path,
		Pos:   Position{Path: path, Dev: fr.id.dev, Ino: fr.id.ino, Offset: fr.emitted()},
		Split: split,
	})
}

// finish points every line's Text into the arena and returns the lines.
func (b *batch) finish() []Line {
	start := 0
	for i := range b.lines {
		end := b.ends[i]
		b.lines[i].Text = b.arena[start:end:end]
		start = end
	}
	return b.lines
}

func (b *batch) reset() {
	clear(b.lines) // drop references to the arena and paths
	b.lines, b.ends, b.arena, b.snap = b.lines[:0], b.ends[:0], b.arena[:0], nil
}
