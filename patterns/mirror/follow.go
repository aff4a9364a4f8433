// Package mirror keeps copies of a publisher's streams on other nodes, so
// that the publisher's disk is not the only copy.
//
// The publisher stays each stream's single writer. A copy follows it with
// the consumers' own fetch path (the pull protocol's fetch, long polling,
// batched) and appends the batches it receives as they are, still
// compressed, at the same offsets (spool.Log.AppendBatches): every copy is
// byte-identical to the publisher's log, and serves the same bytes.
//
// This package holds the follower that keeps one copy of one stream up to
// date. What is still to come (issue 32): choosing the holders by
// rendezvous hashing over gossip members, acknowledging a publish once K
// copies are durable, serving a copy under the publisher's identity when
// the publisher is gone, and copying consumer group state.
package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/internal/ctxutil"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// Errors a Follower's Run ends with, besides ctx's.
var (
	// ErrClosed is returned by Run after Close.
	ErrClosed = errors.New("mirror: closed")
	// ErrGap is returned by Run when the publisher no longer holds the
	// records the copy needs next (retention removed them): a copy never
	// holds a gap.
	ErrGap = errors.New("mirror: the publisher no longer holds the next records")
	// ErrRefused is returned by Run when the publisher refuses the stream
	// for good (its ACL forbids this node, or it says the request is bad).
	ErrRefused = errors.New("mirror: the publisher refuses the copy")
)

// FollowerConfig configures a Follower. Endpoint, Stream and Log are
// required.
type FollowerConfig struct {
	// Endpoint is the publisher's spool server (pull.Server).
	Endpoint string
	// Stream is the stream to copy.
	Stream string
	// Log is the copy. The Follower appends to it (AppendBatches) from its
	// next offset; nothing else should append to it. The Follower does
	// not close it.
	Log *spool.Log
	// Socket configures the DEALER socket (CURVE keys, heartbeats).
	Socket socket.Config
	// MaxBytes bounds one fetch's batches (default 1 MiB).
	MaxBytes int
	// MaxWait is how long a fetch at the end of the stream waits for
	// records at the publisher (default 1 s).
	MaxWait time.Duration
	// Logger receives the follower's logs; nil discards them.
	Logger *slog.Logger
}

// Follower keeps a copy of one publisher's stream: it fetches the records
// after the copy's end and appends them byte for byte. Run copies until
// its context ends; Lag reports how far behind the copy is. It is safe
// for concurrent use; Close is idempotent.
type Follower struct {
	cfg FollowerConfig
	log *slog.Logger

	high    atomic.Uint64 // the publisher's end at its last reply
	damaged atomic.Uint64 // fetched batches that failed their check

	mu      sync.Mutex
	closed  bool
	running bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// NewFollower checks cfg and returns a Follower; Run starts copying.
func NewFollower(cfg FollowerConfig) (*Follower, error) {
	switch {
	case cfg.Endpoint == "":
		return nil, errors.New("mirror: FollowerConfig.Endpoint is required")
	case cfg.Stream == "":
		return nil, errors.New("mirror: FollowerConfig.Stream is required")
	case cfg.Log == nil:
		return nil, errors.New("mirror: FollowerConfig.Log is required")
	case cfg.MaxBytes < 0, cfg.MaxWait < 0:
		return nil, errors.New("mirror: negative FollowerConfig value")
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 1 << 20
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = time.Second
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if cfg.Socket.Logger == nil {
		cfg.Socket.Logger = lg
	}
	return &Follower{cfg: cfg, log: lg.With("component", "mirror", "stream", cfg.Stream, "endpoint", cfg.Endpoint)}, nil
}

// Lag returns how many records the copy was behind the publisher at the
// last reply (0 before the first).
func (f *Follower) Lag() uint64 {
	h, n := f.high.Load(), f.cfg.Log.NextOffset()
	if h <= n {
		return 0
	}
	return h - n
}

// Damaged returns how many fetched batches failed their check (they were
// fetched again, never stored).
func (f *Follower) Damaged() uint64 { return f.damaged.Load() }

// Run copies the stream until ctx ends (it returns ctx.Err()), Close is
// called (ErrClosed), or the copy cannot go on: ErrGap, ErrRefused, or a
// failure of the copy's log. Transient failures (the publisher away, a
// damaged transfer) are retried. One Run at a time.
func (f *Follower) Run(ctx context.Context) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return ErrClosed
	}
	if f.running {
		f.mu.Unlock()
		return errors.New("mirror: Run is already running")
	}
	ctx, cancel := context.WithCancel(ctx)
	f.running, f.cancel, f.done = true, cancel, make(chan struct{})
	f.mu.Unlock()
	defer func() {
		cancel()
		f.mu.Lock()
		f.running = false
		close(f.done)
		f.mu.Unlock()
	}()
	err := f.copyLoop(ctx)
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return err
}

// Close stops Run and waits for it to return. It is idempotent.
func (f *Follower) Close() error {
	f.mu.Lock()
	f.closed = true
	cancel, done := f.cancel, f.done
	f.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}

// copyLoop fetches and appends until ctx ends or a permanent failure.
func (f *Follower) copyLoop(ctx context.Context) error {
	sock, err := socket.New(socket.Dealer, f.cfg.Socket)
	if err != nil {
		return fmt.Errorf("mirror: create socket: %w", err)
	}
	defer sock.Close()
	if err := sock.Connect(f.cfg.Endpoint); err != nil {
		return fmt.Errorf("mirror: connect to %s: %w", f.cfg.Endpoint, err)
	}
	var id uint32
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		pos := f.cfg.Log.NextOffset()
		id++
		rep, err := f.fetch(ctx, sock, id, pos)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			f.log.Debug("fetch failed", "offset", pos, "err", err)
			continue // sent again: replies to the old id are skipped
		}
		if err := f.apply(ctx, rep, pos); err != nil {
			return err
		}
	}
}

// fetch sends one fetch at pos and waits for its reply, a bounded time.
func (f *Follower) fetch(ctx context.Context, sock *socket.Socket, id uint32, pos uint64) (pull.Reply, error) {
	req := pull.Request{Version: pull.ProtocolVersion, Op: pull.OpFetch, ID: id, Offset: pos,
		MaxBytes: uint32(f.cfg.MaxBytes), MaxWaitMillis: uint32(f.cfg.MaxWait / time.Millisecond),
		Stream: f.cfg.Stream, Epoch: pull.NoEpoch}
	wctx, cancel := context.WithTimeout(ctx, f.cfg.MaxWait+5*time.Second)
	defer cancel()
	if err := sock.Send(wctx, socket.Msg{Frames: pull.EncodeRequest(&req)}); err != nil {
		return pull.Reply{}, err
	}
	for {
		m, err := sock.Recv(wctx)
		if err != nil {
			return pull.Reply{}, err
		}
		rep, err := pull.DecodeReply(m.Frames)
		if err != nil {
			f.log.Warn("bad reply", "err", err)
			continue
		}
		if rep.ID == id {
			return rep, nil
		}
	}
}

// apply acts on a fetch reply for the records from pos.
func (f *Follower) apply(ctx context.Context, rep pull.Reply, pos uint64) error {
	switch rep.Status {
	case pull.StatusOK:
		f.high.Store(rep.High)
		if len(rep.Data) == 0 {
			return nil
		}
		_, err := f.cfg.Log.AppendBatches(ctx, rep.Data, pos)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, spool.ErrCorrupt):
			// Damaged in transit or at the publisher: never stored; the
			// next fetch asks for the same records again.
			f.damaged.Add(1)
			f.log.Warn("fetched batches damaged: fetching them again", "offset", pos, "err", err)
			return sleep(ctx, 200*time.Millisecond)
		case errors.Is(err, spool.ErrOffsetMismatch), errors.Is(err, spool.ErrNoSpace):
			f.log.Warn("copy refused the batches: fetching again", "offset", pos, "err", err)
			return sleep(ctx, 200*time.Millisecond)
		case ctx.Err() != nil:
			return ctx.Err()
		}
		return fmt.Errorf("mirror: append to the copy: %w", err)
	case pull.StatusGap, pull.StatusOutOfRange:
		return fmt.Errorf("%w: the copy needs offset %d, the publisher holds %d to %d", ErrGap, pos, rep.Oldest, rep.High)
	case pull.StatusForbidden, pull.StatusBadRequest:
		return fmt.Errorf("%w: %s: %s", ErrRefused, rep.Status, rep.Data)
	}
	// Not served (yet), damaged at the publisher, another log: try again.
	f.log.Debug("fetch not served", "offset", pos, "status", rep.Status.String(), "err", string(rep.Data))
	return sleep(ctx, time.Second)
}

// sleep waits d or until ctx ends (then it returns ctx.Err()).
func sleep(ctx context.Context, d time.Duration) error {
	if !ctxutil.Sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}
