package rpc

import (
	"context"
	"testing"
	"time"

	"github.com/fastmq/fastmq/socket"
)

// TestCopiesOfOneCallBounded: copies of one keyed call that arrive while
// it runs wait for its reply, but only maxWaiters of them; the rest are
// answered "overloaded" at once instead of being held by a peer that
// repeats a slow call.
func TestCopiesOfOneCallBounded(t *testing.T) {
	release := make(chan struct{})
	srv, err := NewServer(ServerConfig{Service: "svc", Handler: func(ctx context.Context, req []byte) ([]byte, error) {
		<-release
		return req, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	d, err := socket.New(socket.Dealer, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Connect(srv.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const copies = maxWaiters + 4
	for i := range copies + 1 {
		hdr := appendRequest(nil, request{id: uint64(i + 1), clientID: []byte("c"), key: []byte("k")})
		if err := d.Send(ctx, socket.NewMsg(nil, hdr, []byte("x"))); err != nil {
			t.Fatal(err)
		}
	}
	got := map[Status]int{}
	recv := func() {
		m, err := d.Recv(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		_, st, err := decodeReply(m.Frames[1])
		if err != nil {
			t.Fatal(err)
		}
		got[st]++
	}
	for got[StatusOverloaded] < copies-maxWaiters {
		recv() // the copies beyond maxWaiters, answered while the call runs
	}
	close(release)
	for got[StatusOK] < maxWaiters+1 {
		recv()
	}
	if got[StatusOverloaded] != copies-maxWaiters || got[StatusOK] != maxWaiters+1 || len(got) != 2 {
		t.Fatalf("replies %v, want %d ok and %d overloaded", got, maxWaiters+1, copies-maxWaiters)
	}
}
