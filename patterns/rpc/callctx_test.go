package rpc

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A handler's context carries the request's deadline and ends with it
// (or with the server, or when the handler returns) as a
// context.WithDeadline would, though it makes no timer until asked.
func TestCallCtx(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		dl := time.Now().Add(20 * time.Millisecond)
		c := newCallCtx(context.Background(), dl)
		defer c.release()
		if d, ok := c.Deadline(); !ok || !d.Equal(dl) {
			t.Fatalf("Deadline() = %v, %v", d, ok)
		}
		child, cancel := context.WithCancel(c)
		defer cancel()
		<-child.Done() // ends when the deadline passes
		if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err() = %v, child %v", c.Err(), child.Err())
		}
	})
	t.Run("derived", func(t *testing.T) {
		c := newCallCtx(context.Background(), time.Now().Add(time.Hour))
		child, cancel := context.WithTimeout(c, time.Hour)
		defer cancel()
		c.release() // the handler returned: what it derived ends too
		<-child.Done()
		if !errors.Is(child.Err(), context.Canceled) {
			t.Fatalf("derived Err() = %v", child.Err())
		}
	})
	t.Run("err without done", func(t *testing.T) {
		c := newCallCtx(context.Background(), time.Now().Add(-time.Millisecond))
		defer c.release()
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err() past the deadline = %v", c.Err())
		}
		select {
		case <-c.Done():
		default:
			t.Fatal("Err reported the end but Done is open")
		}
	})
	t.Run("parent", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		c := newCallCtx(parent, time.Now().Add(time.Hour))
		defer c.release()
		if c.Err() != nil {
			t.Fatalf("Err() before the end = %v", c.Err())
		}
		cancel()
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("Err() after the server's end = %v", c.Err())
		}
		<-c.Done()
	})
	t.Run("release", func(t *testing.T) {
		c := newCallCtx(context.Background(), time.Now().Add(time.Hour))
		c.release()
		<-c.Done()
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("Err() after release = %v", c.Err())
		}
	})
}

// context.Cause of a call whose deadline passed is the deadline, not the
// cause (none) of the server's context it derives from.
func TestCallCtxCause(t *testing.T) {
	srv, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newCallCtx(srv, time.Now().Add(-time.Millisecond))
	if err := context.Cause(c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cause %v, want the deadline", err)
	}
	c.release()
	live := newCallCtx(srv, time.Now().Add(time.Hour))
	if err := context.Cause(live); err != nil {
		t.Fatalf("cause of a live call: %v", err)
	}
	live.release()
}
