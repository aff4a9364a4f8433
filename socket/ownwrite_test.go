package socket

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq/socket/sockettest"
)

// A DEALER's requests and a ROUTER's replies are written by their
// senders, not handed to the writer goroutine, when it is idle.
func TestDealerRouterSendersWrite(t *testing.T) {
	sockettest.Matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		router := mk(t, Router, Config{})
		dealer := mk(t, Dealer, Config{})
		connect(t, dealer, bind(t, router, ep()))
		for i := range 10 {
			mustSend(t, ctx, dealer, fmt.Sprint("ping", i))
			m := mustRecv(t, ctx, router)
			if len(m) != 2 || m[1] != fmt.Sprint("ping", i) {
				t.Fatalf("ROUTER got %q", m)
			}
			if err := router.Send(ctx, NewMsg([]byte(m[0]), []byte(fmt.Sprint("pong", i)))); err != nil {
				t.Fatal(err)
			}
			eq(t, mustRecv(t, ctx, dealer), fmt.Sprint("pong", i))
		}
		// A writer busy with a heartbeat makes a sender wake it instead.
		if w := dealer.st.ownWrites.Load(); w < 5 {
			t.Errorf("DEALER senders wrote %d of 10 requests", w)
		}
		if w := router.st.ownWrites.Load(); w < 5 {
			t.Errorf("ROUTER senders wrote %d of 10 replies", w)
		}
	})
}

// Concurrent senders on a DEALER, and the ROUTER's replies from several
// goroutines, all arrive once: a sender writing the queue for others
// loses and duplicates nothing.
func TestOwnWriteConcurrentSenders(t *testing.T) {
	sockettest.Matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		// Mandatory: a reply that finds the queue full waits rather than
		// being dropped.
		router := mk(t, Router, Config{RouterMandatory: true})
		dealer := mk(t, Dealer, Config{})
		connect(t, dealer, bind(t, router, ep()))
		waitPeers(t, dealer, 1)
		const senders, each = 8, 200
		var wg sync.WaitGroup
		for g := range 3 { // echo
			wg.Go(func() {
				for range senders * each / 3 {
					m, err := router.Recv(ctx)
					if err != nil {
						t.Error(g, err)
						return
					}
					if err := router.Send(ctx, m); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		for g := range senders {
			wg.Go(func() {
				for i := range each {
					b := binary.BigEndian.AppendUint32([]byte{byte(g)}, uint32(i))
					if err := dealer.Send(ctx, NewMsg(b)); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		seen := make(map[string]bool)
		for len(seen) < senders*each/3*3 {
			k := mustRecv(t, ctx, dealer)[0]
			if seen[k] {
				t.Fatalf("reply %x twice", k)
			}
			seen[k] = true
		}
		wg.Wait()
		if dealer.st.ownWrites.Load() == 0 || router.st.ownWrites.Load() == 0 {
			t.Errorf("senders wrote %d (DEALER) and %d (ROUTER) batches", dealer.st.ownWrites.Load(), router.st.ownWrites.Load())
		}
	})
}

// A sender's write never waits for the network: what a peer that does
// not read leaves unwritten goes to the writer goroutine, Send returns
// (and times out once the queue is full), and the peer later gets every
// message whole and in order.
func TestOwnWriteLeavesRestToWriter(t *testing.T) {
	sockettest.Matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		router := mk(t, Router, Config{RecvHWM: 1, RecvHWMBytes: 1})
		dealer := mk(t, Dealer, Config{SendHWM: 1, SendHWMBytes: 1})
		connect(t, dealer, bind(t, router, ep()))
		waitPeers(t, dealer, 1)
		body := func(i int) []byte {
			b := bytes.Repeat([]byte{byte(i)}, 32<<10)
			binary.BigEndian.PutUint32(b, uint32(i))
			return b
		}
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
		if dealer.st.ownRest.Load() == 0 {
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
