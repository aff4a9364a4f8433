package socket

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/zmtp"
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

func TestLingerFlush(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		pull := mk(t, Pull, Config{})
		push, err := New(Push, Config{Linger: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		connect(t, push, bind(t, pull, ep()))
		const n = 500
		for i := range n {
			mustSend(t, ctx, push, fmt.Sprint(i), strings.Repeat("z", 1000))
		}
		if err := push.Close(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			eq(t, mustRecv(t, ctx, pull)[:1], fmt.Sprint(i))
		}
	})
}

func TestCloseAndEndpoints(t *testing.T) {
	ctx := tctx(t)
	s, err := New(Pull, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{"foo", "tcp://", "tcp://127.0.0.1", "udp://1.2.3.4:5", "tcp://*:5555", "tcp://127.0.0.1:0"} {
		if err := s.Connect(ep); !errors.Is(err, ErrBadEndpoint) {
			t.Errorf("Connect(%q): %v", ep, err)
		}
	}
	// Wildcard host: the resolved endpoint names the port, and a loopback
	// connection reaches it.
	wild := bind(t, s, "tcp://*:0")
	port := wild[strings.LastIndex(wild, ":")+1:]
	if !strings.HasPrefix(wild, "tcp://0.0.0.0:") || port == "0" {
		t.Fatalf("resolved %q", wild)
	}
	push := mk(t, Push, Config{})
	connect(t, push, "tcp://127.0.0.1:"+port)
	mustSend(t, ctx, push, "wild")
	eq(t, mustRecv(t, ctx, s), "wild")
	if err := s.Unbind("tcp://*:0"); err != nil {
		t.Fatal(err)
	}
	addr := bind(t, s, "tcp://127.0.0.1:0")
	if err := s.Unbind(addr); err != nil {
		t.Fatal(err)
	}
	if err := s.Unbind(addr); !errors.Is(err, ErrBadEndpoint) {
		t.Fatalf("second Unbind: %v", err)
	}
	connect(t, s, "tcp://127.0.0.1:1")
	if err := s.Disconnect("tcp://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := s.Recv(ctx)
		errc <- err
	}()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("blocked Recv: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(ctx); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if _, err := s.Bind("tcp://127.0.0.1:0"); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if err := s.Connect("tcp://127.0.0.1:1"); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	for range s.Events() {
	}
	if _, err := s.Recv(ctx); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
}

func TestConcurrentSendAndCloseUnderLoad(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		pull := mk(t, Pull, Config{RecvHWM: 10})
		addr := bind(t, pull, ep())
		push := mk(t, Push, Config{SendHWM: 10, Linger: -1})
		connect(t, push, addr)
		push2 := mk(t, Push, Config{SendHWM: 10})
		connect(t, push2, addr)
		const senders, each = 4, 200
		errc := make(chan error, 2*senders)
		for i := range senders {
			for _, s := range []*Socket{push, push2} {
				go func() {
					for j := range each {
						if err := s.Send(ctx, NewMsgString(fmt.Sprint(i), fmt.Sprint(j))); err != nil {
							errc <- err
							return
						}
					}
					errc <- nil
				}()
			}
		}
		// Receive some, then close everything while senders are busy.
		for range senders * each / 2 {
			mustRecv(t, ctx, pull)
		}
		pull.Close()
		push.Close()
		push2.Close()
		for range 2 * senders {
			if err := <-errc; err != nil && !errors.Is(err, ErrClosed) {
				t.Fatalf("sender: %v", err)
			}
		}
	})
}

func TestCloseWithStuckPeer(t *testing.T) {
	// A peer that completes the handshake and never reads: once kernel
	// buffers fill, our writer blocks in write. Close must still return
	// after the linger time.
	ctx := tctx(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done, stop := make(chan struct{}), make(chan struct{})
	defer func() { close(stop); <-done }()
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r, w := zmtp.NewReader(c, 0), zmtp.NewWriter(c, 0)
		if _, err := zmtp.Handshake(r, w, zmtp.Config{SocketType: "PULL"}); err != nil {
			return
		}
		<-stop // never read again
	}()
	push, err := New(Push, Config{SendHWM: 1, Linger: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	connect(t, push, "tcp://"+l.Addr().String())
	waitPeers(t, push, 1)
	big := make([]byte, 1<<20)
	for i := 0; i < 1000; i++ {
		c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := push.Send(c, NewMsg(big))
		cancel()
		if err != nil {
			break
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- push.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("Close hung on a peer that does not read")
	}
}
