package socket

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// stuckPush returns a PUSH, with the given linger, connected to a PULL
// that never calls Recv (its one-message receive queue stays full, so it
// stops reading), with its send queue full behind full connection
// buffers: a Close or Shutdown of it can only linger until it gives up.
func stuckPush(t *testing.T, ep string, linger time.Duration) *Socket {
	t.Helper()
	ctx := tctx(t)
	pull := mk(t, Pull, Config{RecvHWM: 1})
	push := mk(t, Push, Config{SendHWM: 4, Linger: linger})
	connect(t, push, bind(t, pull, ep))
	waitPeers(t, push, 1)
	big := make([]byte, 1<<20)
	for {
		err := push.Send(withTimeout(ctx, 50), NewMsg(big))
		if isTimeout(err) {
			return push // everything is full
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestShutdownBoundedByCtx: Shutdown returns when its ctx ends even when
// Config.Linger would wait a day for a peer that never reads, with ctx's
// error, and the socket is closed afterwards.
func TestShutdownBoundedByCtx(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		for _, tc := range []struct {
			name string
			ctx  func() (context.Context, context.CancelFunc)
			want error
		}{
			{"deadline", func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 100*time.Millisecond)
			}, context.DeadlineExceeded},
			{"cancelled", func() (context.Context, context.CancelFunc) {
				c, cancel := context.WithCancel(context.Background())
				cancel()
				return c, cancel
			}, context.Canceled},
		} {
			t.Run(tc.name, func(t *testing.T) {
				push := stuckPush(t, ep(), 24*time.Hour)
				ctx, cancel := tc.ctx()
				defer cancel()
				start := time.Now()
				err := push.Shutdown(ctx)
				if !errors.Is(err, tc.want) {
					t.Fatalf("Shutdown: %v, want %v", err, tc.want)
				}
				// Generous for a loaded machine, far below the linger.
				if d := time.Since(start); d > 5*time.Second {
					t.Fatalf("Shutdown took %v", d)
				}
				if err := push.Send(context.Background(), NewMsgString("x")); !errors.Is(err, ErrClosed) {
					t.Fatalf("Send after Shutdown: %v", err)
				}
				if err := push.Close(); err != nil {
					t.Fatal(err)
				}
				for range push.Events() { // closed once closed
				}
			})
		}
	})
}

// TestShutdownDelivers: a Shutdown with time left lingers until what was
// queued is written, and the peer receives all of it, in order, while
// Shutdown waits for it to read (its receive queue holds 10 of 500).
func TestShutdownDelivers(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		pull := mk(t, Pull, Config{RecvHWM: 10})
		push, err := New(Push, Config{Linger: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		connect(t, push, bind(t, pull, ep()))
		waitPeers(t, push, 1)
		const n = 500
		for i := range n {
			mustSend(t, ctx, push, fmt.Sprint(i), string(make([]byte, 1000)))
		}
		got := make(chan error, 1)
		go func() {
			for i := range n {
				m, err := pull.Recv(ctx)
				if err == nil && string(m.Frames[0]) != fmt.Sprint(i) {
					err = fmt.Errorf("message %d is %q", i, m.Frames[0])
				}
				if err != nil {
					got <- err
					return
				}
			}
			got <- nil
		}()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := push.Shutdown(sctx); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	})
}

// TestShutdownTwice: a second Shutdown (or Close) during the first waits
// for it, bounded by its own ctx.
func TestShutdownTwice(t *testing.T) {
	push := stuckPush(t, "inproc://shutdown-twice", 24*time.Hour)
	first := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { first <- push.Shutdown(ctx) }()
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if err := push.Shutdown(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Shutdown: %v", err)
	}
	cancel()
	if err := <-first; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("first Shutdown: %v", err)
	}
	if err := push.Close(); err != nil {
		t.Fatal(err)
	}
}
