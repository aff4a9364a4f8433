package rpc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/rpc"
)

// clockAhead is a context whose deadline the clock has passed while its
// timer has not fired yet: Deadline is in the past, Err still nil. Every
// context.WithDeadline is in this state for a moment.
type clockAhead struct {
	context.Context
	deadline time.Time
}

func (c clockAhead) Deadline() (time.Time, bool) { return c.deadline, true }

// A call made when the clock says its deadline passed fails with
// context.DeadlineExceeded, as a caller that loops on errors.Is expects,
// never with a nil error formatted into the message.
func TestCallAtTheDeadline(t *testing.T) {
	mesh := newMesh(t)
	serve(t, mesh, "s1", echo("s1"), nil)
	c := client(t, mesh, 1, nil)
	waitConnected(t, c, 1)
	for _, opts := range []rpc.CallOptions{{}, {Idempotent: true}} {
		ctx := clockAhead{Context: context.Background(), deadline: time.Now().Add(-time.Millisecond)}
		_, err := c.Call(ctx, []byte("x"), opts)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%+v: Call past the deadline = %v, want context.DeadlineExceeded", opts, err)
		}
		if strings.Contains(err.Error(), "%!") {
			t.Fatalf("%+v: malformed error %q", opts, err)
		}
	}
}
