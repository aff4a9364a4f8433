package socket

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/socket/sockettest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// zmq4's PUB (a test peer only) never stops this goroutine.
		goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run"))
}

// mk creates a socket closed at the end of the test.
func mk(t testing.TB, k Kind, cfg Config) *Socket {
	t.Helper()
	s, err := New(k, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func bind(t testing.TB, s *Socket, ep string) string {
	t.Helper()
	r, err := s.Bind(ep)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func connect(t testing.TB, s *Socket, ep string) {
	t.Helper()
	if err := s.Connect(ep); err != nil {
		t.Fatal(err)
	}
}

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustSend(t testing.TB, ctx context.Context, s *Socket, frames ...string) {
	t.Helper()
	if err := s.Send(ctx, NewMsgString(frames...)); err != nil {
		t.Fatalf("send %q: %v", frames, err)
	}
}

func mustRecv(t testing.TB, ctx context.Context, s *Socket) []string {
	t.Helper()
	m, err := s.Recv(ctx)
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	out := make([]string, len(m.Frames))
	for i, f := range m.Frames {
		out[i] = string(f)
	}
	return out
}

func eq(t testing.TB, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

// waitPeers waits until s has n connected peers.
func waitPeers(t testing.TB, s *Socket, n int) {
	t.Helper()
	testutil.WaitFor(t, fmt.Sprintf("%s with %d peers", s.Kind(), n), 0, func() bool { return s.Stats().Peers == n })
}

// waitEv returns the next event of type typ.
func waitEv(t testing.TB, s *Socket, typ EventType) Event {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	for {
		select {
		case e, ok := <-s.Events():
			if !ok {
				t.Fatalf("events closed waiting for %s", typ)
			}
			if e.Type == typ {
				return e
			}
		case <-timer.C:
			t.Fatalf("no %s event", typ)
		}
	}
}

func isTimeout(err error) bool {
	return errors.Is(err, ErrTimeout) && errors.Is(err, context.DeadlineExceeded)
}

var matrix = sockettest.Matrix

// withTimeout returns a context that ends after ms milliseconds (released
// when its parent ends).
func withTimeout(ctx context.Context, ms int) context.Context {
	c, cancel := context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
	_ = cancel // released by the timer
	return c
}

// queued returns how many received messages wait for Recv.
func (s *Socket) queued() int {
	n := int(s.in.leftN.Load())
	for _, p := range *s.peers.Load() {
		n += p.inq.len()
	}
	return n
}
