package ship

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/fastmq/fastmq/internal/ctxutil"
	"github.com/fastmq/fastmq/internal/tail"
	"github.com/fastmq/fastmq/spool"
)

// Header keys set on shipped records (see the package doc).
const (
	// HeaderSource is the key of the header holding the path a line came
	// from. Every shipped record carries it.
	HeaderSource = "source"
	// HeaderPosition is the key of the header holding "DEV:INO:OFFSET",
	// the position just after the line, on the last line of each file in
	// every batch.
	HeaderPosition = "pos"
)

// readBackWindow is how many of the newest records Run reads back for
// shipped positions: more than one tailer batch (1024 lines).
const readBackWindow = 8192

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrClosed is returned by Run after Close, and by a Run that Close
	// interrupted.
	ErrClosed = errors.New("ship: closed")
	// ErrRunning is returned by Run while another Run is active.
	ErrRunning = errors.New("ship: run already active")
)

// Config configures a Shipper. Spool and Paths are required; the zero
// value of every other field is usable.
type Config struct {
	// Spool is the stream's log the lines are appended to. Required. The
	// Shipper does not close it. Other writers may append to it too, but
	// see the package doc's crash window.
	Spool *spool.Log
	// Stream names the stream in errors and logs. Optional.
	Stream string
	// Paths are the files to follow, by exact path. Required; no
	// duplicates. A path that does not exist yet is read from its
	// beginning when it appears.
	Paths []string
	// StateFile is where the read positions are committed. Empty keeps
	// them in memory only (see the package doc).
	StateFile string
	// StartAtEnd starts a file with no committed position at its end
	// instead of its beginning.
	StartAtEnd bool
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Shipper follows files and appends their lines to a spool, exactly once
// across restarts. Create it with New, run it with Run, stop it by ending
// Run's context or with Close.
//
// Run blocks; one Run may be active at a time, and Run may be called again
// after it returned (it reads the shipped positions back again). Close is
// safe for concurrent use with Run and safe to call twice.
type Shipper struct {
	cfg Config
	log *slog.Logger
	t   *tail.Tailer
	// noState: the tailer starts without saved positions although it was
	// told to keep them (the state file is missing or was damaged), so
	// Run reads the whole retained spool back, not only its newest records.
	noState bool

	mu      sync.Mutex
	closed  bool
	running bool
	cancel  context.CancelFunc // of the active Run
	runDone chan struct{}      // closed when the active Run returns
}

// New validates cfg and opens the tailer's saved positions. It does not
// read any file yet; Run does.
func New(cfg Config) (*Shipper, error) {
	if cfg.Spool == nil {
		return nil, errors.New("ship: Config.Spool is required")
	}
	if len(cfg.Paths) == 0 {
		return nil, errors.New("ship: Config.Paths needs at least one path")
	}
	cfg.Paths = append([]string(nil), cfg.Paths...)
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "ship")
	if cfg.Stream != "" {
		lg = lg.With("stream", cfg.Stream)
	}
	missing := false
	if cfg.StateFile != "" {
		_, err := os.Stat(cfg.StateFile)
		missing = errors.Is(err, os.ErrNotExist)
	}
	t, err := tail.New(tail.Config{
		Paths:      cfg.Paths,
		StateFile:  cfg.StateFile,
		StartAtEnd: cfg.StartAtEnd,
		Logger:     lg,
	})
	if err != nil {
		return nil, fmt.Errorf("ship: %w", err)
	}
	noState := cfg.StateFile == "" || missing || t.LoadError() != nil
	return &Shipper{cfg: cfg, log: lg, t: t, noState: noState}, nil
}

// Run follows the files and appends their lines until ctx ends or Close is
// called. It always returns a non-nil error: ctx.Err() after ctx ended, or
// ErrClosed after Close, once the last batch is synced in the spool and
// its positions committed; ErrRunning if another Run is active; or what
// failed (reading a file, appending, syncing, committing).
func (s *Shipper) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if s.running {
		s.mu.Unlock()
		return ErrRunning
	}
	ctx, cancel := context.WithCancel(ctx)
	s.running, s.cancel, s.runDone = true, cancel, make(chan struct{})
	s.mu.Unlock()
	defer func() {
		cancel()
		s.mu.Lock()
		s.running = false
		close(s.runDone)
		s.mu.Unlock()
	}()

	window := uint64(readBackWindow)
	if s.noState {
		// Without saved positions a file's newest "pos" may lie anywhere
		// in the spool: read all of it back (once, at start).
		window = ^uint64(0)
	}
	shipped, err := readBack(s.cfg.Spool, window)
	if err != nil {
		return fmt.Errorf("ship: %w", err)
	}
	b := batcher{shipped: shipped, lastOf: make(map[fileKey]lastLine)}
	err = s.t.Run(ctx, func(lines []tail.Line) error {
		recs := b.records(lines)
		if len(recs) == 0 {
			return nil
		}
		if err := s.append(ctx, recs); err != nil {
			return err
		}
		// Commit the positions of the batches handled before this one
		// (this batch's are committed on the next call or at the end),
		// once they are durable in the spool: Sync covers every sync
		// policy, none included.
		if err := s.cfg.Spool.Sync(); err != nil {
			return fmt.Errorf("ship: sync: %w", err)
		}
		return s.t.Commit()
	})
	if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
		return err
	}
	// A clean stop: make the last batch durable, then commit it.
	if err := s.cfg.Spool.Sync(); err != nil {
		return fmt.Errorf("ship: sync: %w", err)
	}
	if err := s.t.Commit(); err != nil {
		return fmt.Errorf("ship: commit positions: %w", err)
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return ctx.Err()
}

// append appends a batch of lines. While the disk has no room
// (spool.ErrNoSpace) it waits and tries again, the lines staying unread
// in their files (backpressure, not loss): the shipper keeps running and
// takes them once space returns. It logs the refusal at Error once, and
// again every minute it lasts.
func (s *Shipper) append(ctx context.Context, recs []spool.Record) error {
	wait, since, logged := noSpaceRetryMin, time.Time{}, time.Time{}
	for {
		_, err := s.cfg.Spool.Append(ctx, recs...)
		if err == nil {
			if !since.IsZero() {
				s.log.Warn("appends taken again", "refused_for", time.Since(since).Round(time.Millisecond))
			}
			return nil
		}
		if !errors.Is(err, spool.ErrNoSpace) {
			return fmt.Errorf("ship: append: %w", err)
		}
		now := time.Now()
		if since.IsZero() {
			since = now
		}
		if now.Sub(logged) >= time.Minute {
			s.log.Error("append refused: no space; lines wait in their files", "records", len(recs), "err", err)
			logged = now
		}
		if !ctxutil.Sleep(ctx, wait) {
			return ctx.Err()
		}
		wait = min(2*wait, noSpaceRetryMax)
	}
}

// The pause between tries of an append refused for lack of space.
const (
	noSpaceRetryMin = 50 * time.Millisecond
	noSpaceRetryMax = 2 * time.Second
)

// Close stops an active Run (which commits its last batch first), waits
// for it to return and closes the followed files. It does not close the
// spool. Close is idempotent; later calls return nil.
func (s *Shipper) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	running, cancel, runDone := s.running, s.cancel, s.runDone
	s.mu.Unlock()
	if running {
		cancel()
		<-runDone
	}
	return s.t.Close()
}
