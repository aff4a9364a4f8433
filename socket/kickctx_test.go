package socket

import (
	"context"
	"fmt"
	"testing"

	"github.com/fastmq/fastmq/internal/testutil"
)

// Recv calls passing one context (a server's receivers) register its end
// once, not once per Recv that reads the connection itself.
func TestDirectRecvRegistersContextOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(tctx(t))
	defer cancel()
	router := mk(t, Router, Config{})
	dealer := mk(t, Dealer, Config{})
	connect(t, dealer, bind(t, router, "tcp://127.0.0.1:*"))
	waitPeers(t, dealer, 1)
	const n = 50
	for i := range n {
		res := recvAsync(ctx, dealer)
		testutil.WaitFor(t, "a Recv reading the connection", 0, func() bool { return readingDirectly(dealer) })
		mustSend(t, ctx, dealer, "hi")
		id := mustRecv(t, ctx, router)[0]
		if err := router.Send(ctx, NewMsg([]byte(id), []byte(fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
		if r := <-res; r.err != nil || len(r.frames) != 1 || r.frames[0] != fmt.Sprint(i) {
			t.Fatalf("Recv %d: %q, %v", i, r.frames, r.err)
		}
	}
	if d := dealer.st.directRecv.Load(); d < n {
		t.Fatalf("%d of %d messages read directly", d, n)
	}
	if r := dealer.st.kickRegs.Load(); r != 1 {
		t.Fatalf("%d registrations of one context for %d Recv calls", r, n)
	}
}

// The end of an earlier Recv's context (still registered) does not end a
// later Recv with another context: it reads on and gets the next
// message; and a Recv whose context ends while it reads returns.
func TestDirectRecvEarlierContextEnds(t *testing.T) {
	ctx := tctx(t)
	router := mk(t, Router, Config{})
	dealer := mk(t, Dealer, Config{})
	connect(t, dealer, bind(t, router, "tcp://127.0.0.1:*"))
	waitPeers(t, dealer, 1)
	mustSend(t, ctx, dealer, "hi")
	id := mustRecv(t, ctx, router)[0]

	a, cancelA := context.WithCancel(ctx)
	res := recvAsync(a, dealer)
	testutil.WaitFor(t, "a Recv reading the connection", 0, func() bool { return readingDirectly(dealer) })
	if err := router.Send(ctx, NewMsgString(id, "one")); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil {
		t.Fatal(r.err)
	}

	b, cancelB := context.WithCancel(ctx)
	defer cancelB()
	res = recvAsync(b, dealer)
	testutil.WaitFor(t, "a Recv reading the connection", 0, func() bool { return readingDirectly(dealer) })
	cancelA()
	if err := router.Send(ctx, NewMsgString(id, "two")); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || len(r.frames) != 1 || r.frames[0] != "two" {
		t.Fatalf("Recv after an earlier context ended: %q, %v", r.frames, r.err)
	}

	res = recvAsync(b, dealer)
	testutil.WaitFor(t, "a Recv reading the connection", 0, func() bool { return readingDirectly(dealer) })
	cancelB()
	if r := <-res; r.err != context.Canceled {
		t.Fatalf("Recv whose context ended: %q, %v", r.frames, r.err)
	}
}
