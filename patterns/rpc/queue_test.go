package rpc_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/rpc"
	"github.com/fastmq/fastmq/socket"
)

// A request's deadline counts from its arrival: one that expired while it
// waited in the server socket's receive queue (here, before the server
// started to receive) is never run, though it would still have its whole
// timeout ahead of it counted from when the server took it.
func TestRPCExpiredInReceiveQueueNeverRuns(t *testing.T) {
	mesh := newMesh(t)
	ln, err := socket.New(socket.Router, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := ln.Bind("tcp://127.0.0.1:0")
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	node := join(t, mesh, "a")
	if err := node.Advertise(discovery.Service{Name: "svc", Kind: "ROUTER", Endpoints: []string{ep}}); err != nil {
		ln.Close()
		t.Fatal(err)
	}
	c := client(t, mesh, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The client is connected once the listener has accepted it.
	for accepted := false; !accepted; {
		select {
		case ev := <-ln.Events():
			accepted = ev.Type == socket.EventAccepted
		case <-ctx.Done():
			ln.Close()
			t.Fatal("the client never connected")
		}
	}
	// Nobody receives yet: the request waits in the socket's queue until
	// its deadline passes.
	if _, err := c.Call(ctx, []byte("late"), rpc.CallOptions{Timeout: 100 * time.Millisecond}); !errors.Is(err, context.DeadlineExceeded) {
		ln.Close()
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	// The request's timeout (at most 100 ms) counts from when the socket's
	// reader queued it, which under load may be well after the call began:
	// the server starts once it surely passed, unless the request took
	// longer than that to reach the queue after the call gave up.
	gaveUp := time.Now()
	testutil.WaitFor(t, "the request's deadline passed in the queue", 0, func() bool { return time.Since(gaveUp) > 100*time.Millisecond })
	var ran atomic.Int64
	srv, err := rpc.NewServer(rpc.ServerConfig{Service: "svc", Listener: ln, Handler: func(ctx context.Context, req []byte) ([]byte, error) {
		if string(req) == "late" {
			ran.Add(1)
		}
		return req, nil
	}})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	testutil.WaitFor(t, "the expired request dropped", 0, func() bool { return srv.Stats().Expired == 1 })
	if b, err := c.Call(ctx, []byte("fresh"), rpc.CallOptions{Timeout: 5 * time.Second}); err != nil || string(b) != "fresh" {
		t.Fatalf("a fresh call: %q, %v", b, err)
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the expired request ran %d times", n)
	}
}
