package rpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/rpc"
	"github.com/fastmq/fastmq/socket"
)

// Malformed requests are counted and answered when they can be, never run,
// and the server goes on serving.
func TestRPCMalformedRequests(t *testing.T) {
	ran := make(chan []byte, 16)
	srv, err := rpc.NewServer(rpc.ServerConfig{Service: "svc", Handler: func(ctx context.Context, req []byte) ([]byte, error) {
		ran <- req
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
	good := func(id byte) []byte {
		return []byte{'F', 'M', 'Q', 1, 'Q', 0, 0, 0, 0, 0, 0, 0, 0, id, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'c'}
	}
	bad := [][][]byte{
		{[]byte("no delimiter")},
		{{}},                                    // delimiter, no body
		{{}, []byte("FMQ\x01Q")},                // truncated header
		{{}, good(1)},                           // header without a body frame
		{{}, good(2), []byte("a"), []byte("b")}, // two body frames
		{{}, append(good(3)[:5:5], 0x80)},       // unknown flag, truncated
		{{}, []byte("plain"), []byte("two")},    // plain request of two frames
	}
	for _, frames := range bad {
		if err := d.Send(ctx, socket.Msg{Frames: frames}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "malformed requests counted", 0, func() bool { return srv.Stats().BadRequests == uint64(len(bad)) })
	// Answers come back for what could be answered; a good request works.
	if err := d.Send(ctx, socket.NewMsg(nil, good(9), []byte("ok"))); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := d.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Frames) == 3 && m.Frames[1][13] == 9 {
			if string(m.Frames[2]) != "ok" || m.Frames[1][5] != byte(rpc.StatusOK) {
				t.Fatalf("reply %q", m.Frames)
			}
			break
		}
	}
	if got := <-ran; string(got) != "ok" || len(ran) != 0 {
		t.Fatalf("handler ran on %q (and %d more)", got, len(ran))
	}
}

// Socket receive timeouts in the configuration do not stop a server or a
// client from receiving.
func TestRPCSocketRecvTimeoutIgnored(t *testing.T) {
	mesh := newMesh(t)
	sc := socket.Config{RecvTimeout: 10 * time.Millisecond}
	serve(t, mesh, "a", echo("a"), func(c *rpc.ServerConfig) { c.Socket = sc })
	c := client(t, mesh, 1, func(c *rpc.ClientConfig) { c.Socket = sc })
	for range 3 {
		if _, err := c.Call(context.Background(), []byte("x"), rpc.CallOptions{Timeout: 5 * time.Second}); err != nil {
			t.Fatal(err)
		}
		// Idle past the receive timeout between calls.
		idle := time.NewTimer(30 * time.Millisecond)
		<-idle.C
	}
}
