package socket

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/fastmq/fastmq/socket/sockettest"
)

// REQ and REP write their messages from the sender's goroutine when the
// writer is idle: a round trip takes no hand-off to a writer goroutine.
func TestReqRepWritesDirectly(t *testing.T) {
	sockettest.Matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		rep := mk(t, Rep, Config{})
		req := mk(t, Req, Config{})
		connect(t, req, bind(t, rep, ep()))
		for range 10 {
			mustSend(t, ctx, req, "ping")
			eq(t, mustRecv(t, ctx, rep), "ping")
			mustSend(t, ctx, rep, "pong")
			eq(t, mustRecv(t, ctx, req), "pong")
		}
		// A writer busy with a heartbeat makes a sender queue instead.
		if d := req.st.direct.Load(); d < 5 {
			t.Errorf("REQ wrote %d of 10 requests directly", d)
		}
		if d := rep.st.direct.Load(); d < 5 {
			t.Errorf("REP wrote %d of 10 replies directly", d)
		}
	})
}

// A direct write never waits for the network: what a peer that does not
// read leaves unwritten goes to the writer goroutine, Send returns (and
// times out as a queued send would once the queue is full), and the peer
// later gets every message whole and in order.
func TestDirectWriteLeavesRestToWriter(t *testing.T) {
	sockettest.Matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		rep := mk(t, Rep, Config{RecvHWM: 1, RecvHWMBytes: 1})
		req := mk(t, Req, Config{ReqRelaxed: true, SendHWM: 1, SendHWMBytes: 1})
		connect(t, req, bind(t, rep, ep()))
		waitPeers(t, req, 1)
		body := func(i int) []byte {
			b := bytes.Repeat([]byte{byte(i)}, directMax-64)
			binary.BigEndian.PutUint32(b, uint32(i))
			return b
		}
		// The REP does not read: the connection's buffers fill, then
		// the queue, then Send times out.
		sent := 0
		for ; sent < 5000; sent++ {
			c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			err := req.Send(c, NewMsg(body(sent)))
			cancel()
			if isTimeout(err) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if sent == 5000 {
			t.Fatal("Send never timed out: the REP read after all?")
		}
		if req.st.directRest.Load() == 0 {
			t.Fatal("no direct write left a rest to the writer")
		}
		for i := range sent {
			m, err := rep.Recv(ctx)
			if err != nil {
				t.Fatalf("message %d of %d: %v", i, sent, err)
			}
			if len(m.Frames) != 1 || !bytes.Equal(m.Frames[0], body(i)) {
				t.Fatalf("message %d of %d arrived damaged or out of order", i, sent)
			}
			mustSend(t, ctx, rep, "ok")
		}
	})
}
