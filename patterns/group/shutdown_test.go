package group_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/socket"
)

// stubPublisher is a ROUTER that takes a member's requests and answers
// only its leave, with the status given (none: it never answers). The
// requests it saw go to ops.
type stubPublisher struct {
	ep  string
	ops chan wire.Op
}

func newStubPublisher(t *testing.T, leave wire.Status, answer bool) *stubPublisher {
	t.Helper()
	router, err := socket.New(socket.Router, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := router.Bind("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		router.Close()
		<-done
	})
	p := &stubPublisher{ep: ep, ops: make(chan wire.Op, 1024)}
	go func() {
		defer close(done)
		for {
			msg, err := router.Recv(ctx)
			if err != nil {
				return
			}
			req, err := wire.DecodeRequest(msg.Frames[1:])
			if err != nil {
				continue
			}
			select {
			case p.ops <- req.Op:
			default:
			}
			if req.Op == wire.OpLeave && answer {
				rep := wire.EncodeReply(&wire.Reply{Status: leave, ID: req.ID, Data: []byte("not now")})
				router.Send(ctx, socket.Msg{Frames: append([][]byte{msg.Frames[0]}, rep...)})
			}
		}
	}()
	return p
}

// waitLeave waits for the member's leave to reach p.
func (p *stubPublisher) waitLeave(t *testing.T) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case op := <-p.ops:
			if op == wire.OpLeave {
				return
			}
		case <-timeout:
			t.Fatal("no leave reached the publisher")
		}
	}
}

func stubMember(t *testing.T, p *stubPublisher) *group.Member {
	t.Helper()
	m, err := group.NewMember(group.MemberConfig{Stream: "s", Group: "g", Publishers: map[string]string{"p": p.ep}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// Shutdown waits for the publishers' answers until its context ends, then
// returns the context's error; the member is stopped either way.
func TestShutdownContextEnds(t *testing.T) {
	p := newStubPublisher(t, 0, false)
	m := stubMember(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := m.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a publisher that never answers: %v, want context.DeadlineExceeded", err)
	}
	p.waitLeave(t)
	if _, err := m.Next(context.Background()); !errors.Is(err, group.ErrClosed) {
		t.Fatalf("Next after Shutdown: %v, want ErrClosed", err)
	}
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close after Shutdown: %v", err)
	}
}

// Shutdown returns what a publisher answered the leave with.
func TestShutdownPublisherError(t *testing.T) {
	p := newStubPublisher(t, wire.StatusBadRequest, true)
	m := stubMember(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := m.Shutdown(ctx)
	var se *group.StatusError
	if !errors.As(err, &se) || se.Status != group.StatusBadRequest || se.Msg != "not now" {
		t.Fatalf("Shutdown: %v, want the publisher's StatusBadRequest", err)
	}
}

// Close during a Shutdown ends its wait for the publishers: the Shutdown
// returns ErrClosed, the member stopped.
func TestCloseCutsShutdown(t *testing.T) {
	p := newStubPublisher(t, 0, false)
	m := stubMember(t, p)
	res := make(chan error, 1)
	go func() { res <- m.Shutdown(context.Background()) }()
	p.waitLeave(t)
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-res:
		if !errors.Is(err, group.ErrClosed) {
			t.Fatalf("Shutdown cut by Close: %v, want ErrClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown still waits for the publisher after Close")
	}
}

// A publisher that does not know the group holds no lease of the member:
// its StatusUnknown answer to the leave is no error.
func TestShutdownGroupUnknownThere(t *testing.T) {
	p := newStubPublisher(t, wire.StatusUnknown, true)
	m := stubMember(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v, want nil", err)
	}
}
