package tail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
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
