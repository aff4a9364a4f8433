package rpc_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/rpc"
)

// A call with a deadline, client and server together, allocates less than
// once: the request block is reused from the last call, the reply buffer
// and the handler's context come from the receiver's blocks, and the
// ROUTER hands out the caller's identity without an allocation (the
// handler's reply and the caller's context are the callers' own: here
// made once).
func TestCallAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random")
	}
	mesh := newMesh(t)
	reply := []byte("pong")
	serve(t, mesh, "s1", func(ctx context.Context, req []byte) ([]byte, error) {
		if _, ok := ctx.Deadline(); !ok {
			return nil, rpc.Errorf("no-deadline", "the request carried no deadline")
		}
		return reply, nil
	}, nil)
	c := client(t, mesh, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := make([]byte, 100)
	call := func() {
		if b, err := c.Call(ctx, req, rpc.CallOptions{}); err != nil || string(b) != "pong" {
			t.Fatalf("call: %q %v", b, err)
		}
	}
	for range 100 { // connect, warm up
		call()
	}
	const n = 2000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		call()
	}
	runtime.ReadMemStats(&after)
	if per := float64(after.Mallocs-before.Mallocs) / n; per >= 1 {
		t.Fatalf("%.2f allocations per call, want less than one", per)
	}
}
