package socket

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq/socket/sockettest"
)

// With Config.SenderWrites, DEALER senders that each wait for an answer
// write their messages themselves, and concurrent senders' messages all
// arrive, each sender's in order: a message queued while another sender
// writes is written by that one or by the next, never left behind (the
// test would hang on a lost one).
func TestSenderWritesConcurrentSenders(t *testing.T) {
	sockettest.Matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		router, dealer := routerAndDealer(t, ep(), Config{}, Config{SenderWrites: true})
		const senders, each = 8, 200
		// The ROUTER echoes each message; a sender waits for the echo of
		// its message before the next, as an RPC caller does.
		go func() {
			for {
				m, err := router.Recv(ctx)
				if err != nil {
					return
				}
				if err := router.Send(ctx, m); err != nil {
					return
				}
			}
		}()
		var mu sync.Mutex
		got := map[uint32][]uint32{} // sender -> sequence numbers echoed
		echoed := make(chan struct{}, senders)
		go func() {
			for {
				m, err := dealer.Recv(ctx)
				if err != nil {
					return
				}
				b := m.Frames[0]
				s := binary.BigEndian.Uint32(b)
				mu.Lock()
				got[s] = append(got[s], binary.BigEndian.Uint32(b[4:]))
				mu.Unlock()
				echoed <- struct{}{}
			}
		}()
		var wg sync.WaitGroup
		for s := range senders {
			wg.Go(func() {
				for i := range each {
					b := make([]byte, 8)
					binary.BigEndian.PutUint32(b, uint32(s))
					binary.BigEndian.PutUint32(b[4:], uint32(i))
					if err := dealer.Send(ctx, NewMsg(b)); err != nil {
						t.Error(err)
						return
					}
					select {
					case <-echoed:
					case <-ctx.Done():
						t.Error("no echo:", ctx.Err())
						return
					}
				}
			})
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for s := range uint32(senders) {
			seq := got[s]
			if len(seq) != each {
				t.Fatalf("sender %d: %d of %d messages came back", s, len(seq), each)
			}
			for i, n := range seq {
				if n != uint32(i) {
					t.Fatalf("sender %d: message %d came back as %d-th", s, n, i)
				}
			}
		}
		if dealer.st.claimedWrites.Load() == 0 {
			t.Fatal("no sender wrote: the writer goroutine wrote everything")
		}
	})
}

// A sender writing never waits for the network: what a peer that does not
// read leaves unwritten goes to the writer goroutine, Send returns (and
// times out as a queued send would once the queue is full), and the peer
// later gets every message whole and in order.
func TestSenderWritesLeaveRestToWriter(t *testing.T) {
	sockettest.Matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		router, dealer := routerAndDealer(t, ep(), Config{RecvHWM: 1, RecvHWMBytes: 1}, Config{SenderWrites: true, SendHWM: 1, SendHWMBytes: 1})
		body := func(i int) []byte {
			b := bytes.Repeat([]byte{byte(i)}, 16<<10)
			binary.BigEndian.PutUint32(b, uint32(i))
			return b
		}
		// The ROUTER does not read: the connection's buffers fill, then
		// the queue, then Send times out.
		sent := 0
		for ; sent < 5000; sent++ {
			c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			err := dealer.Send(c, NewMsg(body(sent)))
			cancel()
			if isTimeout(err) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if sent == 5000 {
			t.Fatal("Send never timed out: the ROUTER read after all?")
		}
		if dealer.st.directRest.Load() == 0 {
			t.Fatal("no sender's write left a rest to the writer")
		}
		for i := range sent {
			m, err := router.Recv(ctx)
			if err != nil {
				t.Fatalf("message %d of %d: %v", i, sent, err)
			}
			if len(m.Frames) != 2 || !bytes.Equal(m.Frames[1], body(i)) {
				t.Fatalf("message %d of %d arrived damaged or out of order", i, sent)
			}
		}
	})
}

// A ROUTER's reader goroutine writes the replies its receivers send
// while it lets them run, instead of waking the writer goroutine: over
// many round trips, some replies go out that way, and every reply
// arrives.
func TestRouterReaderWritesReplies(t *testing.T) {
	sockettest.Matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		router, dealer := routerAndDealer(t, ep(), Config{}, Config{})
		// Several receivers, as an RPC server has: the reader goroutine
		// reads for them (a single one would read the connection itself).
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					m, err := router.Recv(ctx)
					if err != nil {
						return
					}
					if err := router.Send(ctx, m); err != nil {
						return
					}
				}
			})
		}
		const n = 500
		for i := range n {
			b := make([]byte, 4)
			binary.BigEndian.PutUint32(b, uint32(i))
			mustSend(t, ctx, dealer, string(b))
			m, err := dealer.Recv(ctx)
			if err != nil {
				t.Fatalf("reply %d: %v", i, err)
			}
			if got := binary.BigEndian.Uint32(m.Frames[0]); got != uint32(i) {
				t.Fatalf("reply %d came as %d", i, got)
			}
		}
		router.Close()
		wg.Wait()
		if strings.HasPrefix(ep(), "inproc") {
			return // an inproc reader reads on without letting receivers run
		}
		if w := router.st.claimedWrites.Load(); w == 0 {
			t.Fatalf("the reader wrote none of %d replies: the writer goroutine wrote them all", n)
		}
	})
}

// A sender does not write a message bigger than a batch itself (what the
// connection did not take would be copied): the writer goroutine writes
// it, and it arrives whole, in order with the small ones around it.
func TestSenderWritesLeaveBigMessagesToWriter(t *testing.T) {
	sockettest.Matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		router, dealer := routerAndDealer(t, ep(), Config{}, Config{SenderWrites: true})
		big := bytes.Repeat([]byte("b"), maxTakeBytes+1)
		for i, body := range [][]byte{[]byte("small"), big, []byte("after")} {
			if err := dealer.Send(ctx, NewMsg(body)); err != nil {
				t.Fatal(err)
			}
			m, err := router.Recv(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Frames) != 2 || !bytes.Equal(m.Frames[1], body) {
				t.Fatalf("message %d: got %d frames, want a body of %d bytes", i, len(m.Frames), len(body))
			}
			if i == 1 {
				if w := dealer.st.claimedWrites.Load(); w != 1 {
					t.Fatalf("senders wrote %d times, want once (the small message): the big one too", w)
				}
			}
		}
	})
}

// A rest of a batch that a write without waiting left is not kept once
// written: a peer that was slow once does not hold a batch's worth of
// buffer for its life.
func TestConnWriterDropsBigRestBuffer(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(io.Discard, b)
	}()
	w := newConnWriter(a)
	w.rest = append(w.rest, make([]byte, maxTakeBytes)...)
	if err := w.flushRest(); err != nil {
		t.Fatal(err)
	}
	if cap(w.rest) > restKeep {
		t.Fatalf("kept a rest buffer of %d bytes", cap(w.rest))
	}
	a.Close()
	b.Close()
	<-done
}

// routerAndDealer makes a ROUTER bound at ep and a DEALER connected to it,
// and waits until the DEALER has its peer.
func routerAndDealer(t *testing.T, ep string, rc, dc Config) (router, dealer *Socket) {
	t.Helper()
	router = mk(t, Router, rc)
	dealer = mk(t, Dealer, dc)
	connect(t, dealer, bind(t, router, ep))
	waitPeers(t, dealer, 1)
	return router, dealer
}
