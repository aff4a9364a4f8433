package tail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/internal/fsutil"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrClosed is returned by every method called after Close, and by a Run
	// that Close interrupted.
	ErrClosed = errors.New("tail: closed")
	// ErrRunning is returned by Run while another Run is active.
	ErrRunning = errors.New("tail: run already active")
	// ErrCorruptState means the state file could not be decoded.
	ErrCorruptState = errors.New("tail: corrupt state file")
	// ErrStateVersion means the state file has a format version this build
	// does not read.
	ErrStateVersion = errors.New("tail: unknown state file version")
)

// StateError describes a state file that could not be used. It wraps
// ErrCorruptState or ErrStateVersion.
type StateError struct {
	File    string // the state file
	MovedTo string // where the unusable file was moved; empty if it was left in place
	Err     error
}

// Error describes the bad state file and what was done with it.
func (e *StateError) Error() string {
	if e.MovedTo != "" {
		return fmt.Sprintf("%v (state file %s, moved to %s)", e.Err, e.File, e.MovedTo)
	}
	return fmt.Sprintf("%v (state file %s)", e.Err, e.File)
}

// Unwrap returns the underlying error.
func (e *StateError) Unwrap() error { return e.Err }

// Defaults for the zero values of Config.
const (
	DefaultPollInterval  = 250 * time.Millisecond
	DefaultMaxLineBytes  = 1 << 20
	DefaultMaxBatchLines = 1024
	DefaultMaxBatchBytes = 1 << 20
	DefaultRotateGrace   = 5 * time.Second
	// maxDraining bounds the rotated-away files kept open per path.
	maxDraining = 8
	// maxRotatedScan bounds the directory entries examined when looking
	// for a rotated file after a restart.
	maxRotatedScan = 10000
)

// Config configures a Tailer. The zero value of every field except Paths is
// usable.
type Config struct {
	// Paths are the files to follow, by exact path. A path may not exist
	// yet; it is read from its beginning when it appears. Required; no
	// duplicates (after filepath.Clean).
	Paths []string
	// StateFile is where positions are persisted by Commit (crash-safe:
	// temporary file, fsync, rename, fsync of the directory). Empty means
	// positions are kept in memory only and Commit does nothing.
	StateFile string
	// StartAtEnd makes a file with no saved position start at its end as
	// seen by New (at the start of its last line if that line has no
	// newline yet). The default starts at its beginning. A path that had no
	// file when it was first followed, and every file that replaces a
	// rotated one, is always read from its beginning.
	StartAtEnd bool
	// PollInterval is how often idle files are checked for new data,
	// truncation and rotation. 0 means DefaultPollInterval (250ms).
	PollInterval time.Duration
	// MaxLineBytes caps the length of a Line's Text. A longer line is
	// delivered in pieces of MaxLineBytes bytes, every piece but the last
	// with Split set. 0 means DefaultMaxLineBytes (1 MiB). Memory per file
	// stays below about MaxLineBytes+64 KiB.
	MaxLineBytes int
	// MaxBatchLines and MaxBatchBytes cap one batch handed to Run's
	// callback. 0 means 1024 lines and 1 MiB (a single line may exceed the
	// byte cap up to MaxLineBytes).
	MaxBatchLines int
	MaxBatchBytes int
	// RotateGrace is how long a file that was rotated away (renamed or
	// deleted) stays open after it stopped growing, so that lines its
	// writer appends before reopening are not lost. 0 means
	// DefaultRotateGrace (5s).
	RotateGrace time.Duration
	// StrictState makes New fail with a *StateError when the state file is
	// corrupt or of an unknown version. By default New moves such a file
	// aside (to StateFile+".corrupt"), logs an error and starts as if there
	// were no saved positions; LoadError reports what happened.
	StrictState bool
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Position is a place in a followed file: the configured path, the
// identity of the file that was at that path (device and inode), and the
// byte offset just after a line.
type Position struct {
	Path     string
	Dev, Ino uint64
	Offset   int64
}

// Line is one line read from a followed file.
type Line struct {
	// Path is the configured path the line was read from (also for lines of
	// a file that has since been rotated away).
	Path string
	// Text is the line without its trailing "\n" (a "\r" before it is also
	// removed). It is only valid until the callback returns; copy it to
	// keep it.
	Text []byte
	// Pos is the position just after this line (after its newline).
	Pos Position
	// Split is set when the line was longer than MaxLineBytes: Text is a
	// piece of it and the next Line from the same file continues it.
	Split bool
}

// follower is the per-path reading state. Owned by Run (or New/Close when
// no Run is active).
type follower struct {
	path        string
	cur         *fileReader   // the file now at path; nil if none
	draining    []*fileReader // rotated-away files, oldest first
	lastProblem string        // last warning logged, to log each problem once
	// resume is the saved position of the file at the path when New could
	// not open it; used if that same file can be opened later.
	resume *filePos
}

// Tailer follows files like `tail -F` and keeps read positions.
//
// Run must be called from one goroutine at a time; Positions, Commit and
// Close may be called concurrently with Run and with each other. Run
// blocks until its context ends, Close is called or the callback fails.
// Close is idempotent; it waits for an active Run to return, so it must not
// be called from the callback.
type Tailer struct {
	cfg Config
	log *slog.Logger
	fs  []*follower

	// Owned by the goroutine in Run.
	batch batch
	next  int  // follower to visit first in the next collect
	dirty bool // reader state changed since the last published snapshot

	polls atomic.Uint64 // completed collect rounds; lets tests wait for polls

	done     chan struct{} // closed by Close
	commitMu sync.Mutex    // serialises Commit
	commitGn uint64        // generation last written; guarded by commitMu

	mu      sync.Mutex
	handled []pathState // positions of handled lines; immutable once published
	gen     uint64      // incremented with every published snapshot
	closed  bool
	running bool
	runDone chan struct{}
	loadErr error
}

// New validates cfg, loads the saved positions and opens the files that
// exist. It does not start reading; call Run.
func New(cfg Config) (*Tailer, error) {
	if len(cfg.Paths) == 0 {
		return nil, errors.New("tail: no paths to follow")
	}
	switch {
	case cfg.PollInterval < 0:
		return nil, errors.New("tail: negative poll interval")
	case cfg.MaxLineBytes < 0:
		return nil, errors.New("tail: negative maximum line length")
	case cfg.MaxBatchLines < 0 || cfg.MaxBatchBytes < 0:
		return nil, errors.New("tail: negative batch limit")
	case cfg.RotateGrace < 0:
		return nil, errors.New("tail: negative rotate grace")
	}
	c := cfg
	c.Paths = make([]string, len(cfg.Paths))
	seen := make(map[string]bool, len(cfg.Paths))
	for i, p := range cfg.Paths {
		if p == "" {
			return nil, errors.New("tail: empty path")
		}
		p = filepath.Clean(p)
		if seen[p] {
			return nil, fmt.Errorf("tail: path %s listed twice", p)
		}
		seen[p] = true
		c.Paths[i] = p
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = DefaultMaxLineBytes
	}
	if c.MaxBatchLines == 0 {
		c.MaxBatchLines = DefaultMaxBatchLines
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.RotateGrace == 0 {
		c.RotateGrace = DefaultRotateGrace
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Tailer{
		cfg:  c,
		log:  log.With("component", "tail"),
		done: make(chan struct{}),
	}
	t.batch.maxLines, t.batch.maxBytes = c.MaxBatchLines, c.MaxBatchBytes
	saved, err := t.loadState()
	if err != nil {
		return nil, err
	}
	for _, p := range c.Paths {
		f := &follower{path: p}
		t.fs = append(t.fs, f)
		ps, ok := saved[p]
		t.restore(f, ps, ok)
	}
	t.handled = t.snapshot()
	t.gen = 1
	return t, nil
}

// LoadError returns the *StateError that New recovered from by starting
// without saved positions, or nil if the state file was fine or absent.
func (t *Tailer) LoadError() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.loadErr
}

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

// problem logs a warning about f once until the problem changes.
func (t *Tailer) problem(f *follower, msg string, err error) {
	key := msg + ": " + err.Error()
	if key == f.lastProblem {
		return
	}
	f.lastProblem = key
	t.log.Warn(msg, "path", f.path, "err", err)
}

// Run reads lines from the followed files and calls fn with batches of
// them, in file order per path (the rest of a rotated-away file before the
// file that replaced it). When fn returns nil the batch is handled: its
// positions become the in-memory positions (see Positions and Commit).
//
// fn owns neither the slice nor the Text bytes: both are reused after fn
// returns. fn runs on the caller's goroutine; while it runs, no reading
// happens.
//
// Run returns ctx.Err() when ctx ends, ErrClosed after Close, ErrRunning if
// another Run is active, a read error, or fn's error (wrapped). After fn
// fails, the batch is not handled; the next call to Run delivers it again
// first. Run always returns a non-nil error.
func (t *Tailer) Run(ctx context.Context, fn func(lines []Line) error) error {
	if fn == nil {
		return errors.New("tail: nil batch handler")
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	if t.running {
		t.mu.Unlock()
		return ErrRunning
	}
	t.running = true
	runDone := make(chan struct{})
	t.runDone = runDone
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.running = false
		close(runDone)
		t.mu.Unlock()
	}()

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.done:
			return ErrClosed
		default:
		}
		progressed := false
		if len(t.batch.lines) == 0 {
			p, err := t.collect(time.Now())
			if err != nil {
				return err
			}
			progressed = p
		}
		if len(t.batch.lines) > 0 {
			lines := t.batch.finish()
			if err := fn(lines); err != nil {
				return fmt.Errorf("tail: batch handler: %w", err)
			}
			t.publish(t.batch.snap)
			t.batch.reset()
			continue
		}
		if t.dirty {
			t.publish(t.snapshot())
		}
		if progressed {
			continue
		}
		timer.Reset(t.cfg.PollInterval)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.done:
			return ErrClosed
		case <-timer.C:
		}
	}
}

// publish makes snap the handled positions.
func (t *Tailer) publish(snap []pathState) {
	t.dirty = false
	t.mu.Lock()
	t.handled = snap
	t.gen++
	t.mu.Unlock()
}

// snapshot captures the readers' positions.
func (t *Tailer) snapshot() []pathState {
	out := make([]pathState, len(t.fs))
	for i, f := range t.fs {
		n := len(f.draining)
		if f.cur != nil {
			n++
		}
		ps := pathState{path: f.path, files: make([]filePos, 0, n)}
		for _, d := range f.draining {
			ps.files = append(ps.files, d.pos())
		}
		if f.cur != nil {
			ps.files = append(ps.files, f.cur.pos())
		}
		out[i] = ps
	}
	return out
}

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

// Positions returns the positions of the handled lines, one per file being
// read: for each path in Config order, its rotated-away files still being
// drained first, then the file at the path. A path with no file has no
// entry. The caller owns the returned slice.
func (t *Tailer) Positions() []Position {
	t.mu.Lock()
	snap := t.handled
	t.mu.Unlock()
	var out []Position
	for _, ps := range snap {
		for _, fp := range ps.files {
			out = append(out, Position{Path: ps.path, Dev: fp.id.dev, Ino: fp.id.ino, Offset: fp.off})
		}
	}
	return out
}

// Commit writes the positions of the handled lines to the state file,
// crash-safely. Call it once the lines handed to Run's callback are
// durable in the sink. It does nothing when nothing changed since the last
// Commit or when Config.StateFile is empty. Called from inside Run's
// callback, it persists the positions up to the previous batch (the batch
// being handled is not handled until the callback returns). Safe for
// concurrent use; it
// blocks for the duration of the write and fsyncs. Returns ErrClosed after
// Close.
func (t *Tailer) Commit() error {
	t.commitMu.Lock()
	defer t.commitMu.Unlock()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	snap, gen := t.handled, t.gen
	t.mu.Unlock()
	if t.cfg.StateFile == "" || gen == t.commitGn {
		return nil
	}
	start := time.Now()
	if err := writeFileAtomic(t.cfg.StateFile, encodeState(snap)); err != nil {
		return err
	}
	if d := time.Since(start); d > time.Second {
		t.log.Warn("slow state file commit", "duration", d)
	}
	t.commitGn = gen
	return nil
}

// Close stops the Tailer: an active Run returns ErrClosed, and Close waits
// for it, then closes all files. It does not Commit. Idempotent; later
// calls return nil.
func (t *Tailer) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.done)
	running, runDone := t.running, t.runDone
	t.mu.Unlock()
	if running {
		<-runDone
	}
	var errs []error
	for _, f := range t.fs {
		for _, d := range f.draining {
			errs = append(errs, d.close())
		}
		f.draining = nil
		if f.cur != nil {
			errs = append(errs, f.cur.close())
			f.cur = nil
		}
	}
	return errors.Join(errs...)
}
