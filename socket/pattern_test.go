package socket

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/internal/zmtp"
)

func TestRouterMandatory(t *testing.T) {
	ctx := tctx(t)
	r := mk(t, Router, Config{RouterMandatory: true})
	if err := r.Send(ctx, NewMsgString("nobody", "x")); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("mandatory: %v", err)
	}
	r2 := mk(t, Router, Config{})
	if err := r2.Send(ctx, NewMsgString("nobody", "x")); err != nil {
		t.Fatalf("not mandatory: %v", err)
	}
	if r2.Stats().Dropped != 1 {
		t.Fatalf("stats %+v", r2.Stats())
	}
	// Generated identities route replies.
	d := mk(t, Dealer, Config{})
	connect(t, d, bind(t, r, "inproc://mandatory"))
	mustSend(t, ctx, d, "q")
	got := mustRecv(t, ctx, r)
	if len(got) != 2 || len(got[0]) != 5 || got[0][0] != 0 {
		t.Fatalf("got %q", got)
	}
	mustSend(t, ctx, r, got[0], "a")
	eq(t, mustRecv(t, ctx, d), "a")
}

func TestReqRepState(t *testing.T) {
	ctx := tctx(t)
	rep := mk(t, Rep, Config{})
	req := mk(t, Req, Config{})
	connect(t, req, bind(t, rep, "inproc://state"))
	if _, err := req.Recv(ctx); !errors.Is(err, ErrState) {
		t.Fatalf("REQ Recv first: %v", err)
	}
	if err := rep.Send(ctx, NewMsgString("x")); !errors.Is(err, ErrState) {
		t.Fatalf("REP Send first: %v", err)
	}
	mustSend(t, ctx, req, "1")
	if err := req.Send(ctx, NewMsgString("2")); !errors.Is(err, ErrState) {
		t.Fatalf("REQ Send twice: %v", err)
	}
	eq(t, mustRecv(t, ctx, rep), "1")
	if _, err := rep.Recv(ctx); !errors.Is(err, ErrState) {
		t.Fatalf("REP Recv twice: %v", err)
	}
	mustSend(t, ctx, rep, "r1")
	eq(t, mustRecv(t, ctx, req), "r1")

	// Relaxed + correlated: a second request supersedes the first, whose
	// late reply is discarded.
	rep2 := mk(t, Rep, Config{})
	req2 := mk(t, Req, Config{ReqRelaxed: true, ReqCorrelate: true})
	connect(t, req2, bind(t, rep2, "inproc://state2"))
	mustSend(t, ctx, req2, "a")
	mustSend(t, ctx, req2, "b")
	eq(t, mustRecv(t, ctx, rep2), "a")
	mustSend(t, ctx, rep2, "reply-a")
	eq(t, mustRecv(t, ctx, rep2), "b")
	mustSend(t, ctx, rep2, "reply-b")
	eq(t, mustRecv(t, ctx, req2), "reply-b")
}

// TestRouterIdentityInUse: a second connection claiming an identity that a
// ROUTER peer holds is refused (libzmq's default) and cannot receive that
// peer's messages; with RouterHandover it takes the identity over. A peer
// may not claim a generated (zero-prefixed) identity.
func TestRouterIdentityInUse(t *testing.T) {
	ctx := tctx(t)
	for _, handover := range []bool{false, true} {
		t.Run(fmt.Sprintf("handover=%v", handover), func(t *testing.T) {
			r := mk(t, Router, Config{RouterHandover: handover, RouterMandatory: true})
			addr := bind(t, r, "tcp://127.0.0.1:0")
			alice := mk(t, Dealer, Config{Identity: []byte("alice")})
			connect(t, alice, addr)
			mustSend(t, ctx, alice, "hi")
			eq(t, mustRecv(t, ctx, r), "alice", "hi")

			impostor := rawDial(t, addr)
			_ = impostor.c.SetDeadline(time.Now().Add(5 * time.Second))
			_, herr := zmtp.Handshake(impostor.r, impostor.w, zmtp.Config{SocketType: "DEALER", Identity: []byte("alice")})
			if !handover {
				ev := waitEv(t, r, EventHandshakeFailed)
				if !errors.Is(ev.Err, ErrIdentityInUse) {
					t.Fatalf("impostor refused with %v, want ErrIdentityInUse", ev.Err)
				}
				mustSend(t, ctx, r, "alice", "secret")
				eq(t, mustRecv(t, ctx, alice), "secret")
				return
			}
			if herr != nil {
				t.Fatalf("handover handshake: %v", herr)
			}
			waitEv(t, r, EventAccepted) // alice's
			waitEv(t, r, EventAccepted) // the new holder's
			mustSend(t, ctx, r, "alice", "to-new")
			_ = impostor.c.SetReadDeadline(time.Now().Add(5 * time.Second))
			frames, _, err := impostor.r.Next(nil)
			if err != nil || len(frames) != 1 || string(frames[0]) != "to-new" {
				t.Fatalf("new holder read %q, %v", frames, err)
			}
		})
	}
	t.Run("zero-prefixed", func(t *testing.T) {
		r := mk(t, Router, Config{})
		addr := bind(t, r, "tcp://127.0.0.1:0")
		p := rawDial(t, addr)
		_ = p.c.SetDeadline(time.Now().Add(5 * time.Second))
		zmtp.Handshake(p.r, p.w, zmtp.Config{SocketType: "DEALER", Identity: []byte("\x00abcd")})
		if ev := waitEv(t, r, EventHandshakeFailed); !errors.Is(ev.Err, ErrIdentityInUse) {
			t.Fatalf("zero-prefixed identity refused with %v", ev.Err)
		}
	})
}

// TestReqRecvNotBlockedBySend: a REQ whose Send waits for a peer does not
// hold up a concurrent Recv past that Recv's own context.
func TestReqRecvNotBlockedBySend(t *testing.T) {
	req := mk(t, Req, Config{})
	sendCtx, cancelSend := context.WithCancel(context.Background())
	sent := make(chan error, 1)
	go func() { sent <- req.Send(sendCtx, NewMsgString("q")) }() // no peer: blocks
	// Call Recv only once the Send is under way (it holds nothing a Recv
	// needs while it waits).
	deadline := time.Now().Add(10 * time.Second)
	for {
		req.req.mu.Lock()
		sending := req.req.sending
		req.req.mu.Unlock()
		if sending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Send never started")
		}
		time.Sleep(time.Millisecond)
	}
	recvCtx, cancelRecv := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelRecv()
	got := make(chan error, 1)
	go func() { _, err := req.Recv(recvCtx); got <- err }()
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("Recv returned a message with no request sent")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Recv stayed blocked behind a pending Send")
	}
	cancelSend()
	if err := <-sent; err == nil {
		t.Fatal("Send without a peer succeeded")
	}
}

func TestPushPull(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		pull := mk(t, Pull, Config{})
		push := mk(t, Push, Config{})
		addr := bind(t, pull, ep())
		connect(t, push, addr)
		for i := range 100 {
			mustSend(t, ctx, push, fmt.Sprint(i), "x")
		}
		for i := range 100 {
			eq(t, mustRecv(t, ctx, pull), fmt.Sprint(i), "x")
		}
	})
}

func TestDealerRouter(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		router := mk(t, Router, Config{})
		dealer := mk(t, Dealer, Config{Identity: []byte("d1")})
		addr := bind(t, router, ep())
		connect(t, dealer, addr)
		mustSend(t, ctx, dealer, "hello")
		eq(t, mustRecv(t, ctx, router), "d1", "hello")
		mustSend(t, ctx, router, "d1", "world", "2")
		eq(t, mustRecv(t, ctx, dealer), "world", "2")
	})
}

func TestPubSub(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		pub := mk(t, Pub, Config{})
		sub := mk(t, Sub, Config{})
		addr := bind(t, pub, ep())
		if err := sub.Subscribe([]byte("a.")); err != nil {
			t.Fatal(err)
		}
		connect(t, sub, addr)
		// Publish until the subscription has arrived.
		testutil.WaitFor(t, "subscription", 0, func() bool {
			mustSend(t, ctx, pub, "a.probe")
			_, err := sub.Recv(withTimeout(ctx, 20))
			return err == nil
		})
		for sub.queued() > 0 { // drain extra probes
			mustRecv(t, ctx, sub)
		}
		mustSend(t, ctx, pub, "b.no", "x")
		mustSend(t, ctx, pub, "a.yes", "y")
		eq(t, mustRecv(t, ctx, sub), "a.yes", "y")
		if err := sub.Unsubscribe([]byte("a.")); err != nil {
			t.Fatal(err)
		}
		if err := sub.Subscribe([]byte("b.")); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, "resubscription", 0, func() bool {
			mustSend(t, ctx, pub, "b.probe")
			_, err := sub.Recv(withTimeout(ctx, 20))
			return err == nil
		})
		for sub.queued() > 0 {
			mustRecv(t, ctx, sub)
		}
		mustSend(t, ctx, pub, "a.no")
		mustSend(t, ctx, pub, "b.yes")
		eq(t, mustRecv(t, ctx, sub), "b.yes")
		if _, err := pub.Recv(ctx); !errors.Is(err, ErrNotSupported) {
			t.Fatalf("PUB Recv: %v", err)
		}
		if err := sub.Send(ctx, NewMsgString("x")); !errors.Is(err, ErrNotSupported) {
			t.Fatalf("SUB Send: %v", err)
		}
	})
}

func TestXPubXSub(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		xpub := mk(t, XPub, Config{})
		xsub := mk(t, XSub, Config{})
		sub := mk(t, Sub, Config{})
		connect(t, xsub, bind(t, xpub, ep()))
		connect(t, sub, bind(t, xpub, ep()))
		waitPeers(t, xpub, 2)
		mustSend(t, ctx, xsub, "\x01t")
		eq(t, mustRecv(t, ctx, xpub), "\x01t")
		if err := sub.Subscribe([]byte("t")); err != nil {
			t.Fatal(err)
		}
		if err := sub.Subscribe([]byte("u")); err != nil {
			t.Fatal(err)
		}
		// "t" is already subscribed: only "u" is news.
		eq(t, mustRecv(t, ctx, xpub), "\x01u")
		mustSend(t, ctx, xpub, "tick")
		eq(t, mustRecv(t, ctx, xsub), "tick")
		eq(t, mustRecv(t, ctx, sub), "tick")
		sub.Close()
		eq(t, mustRecv(t, ctx, xpub), "\x00u")
	})
}

func TestReqRep(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		rep := mk(t, Rep, Config{})
		req := mk(t, Req, Config{})
		connect(t, req, bind(t, rep, ep()))
		for i := range 5 {
			mustSend(t, ctx, req, "ping", fmt.Sprint(i))
			eq(t, mustRecv(t, ctx, rep), "ping", fmt.Sprint(i))
			mustSend(t, ctx, rep, "pong", fmt.Sprint(i))
			eq(t, mustRecv(t, ctx, req), "pong", fmt.Sprint(i))
		}
	})
}

func TestReqRouterDealerRep(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		// REQ -> ROUTER sees [id, "", body].
		router := mk(t, Router, Config{})
		req := mk(t, Req, Config{Identity: []byte("r1")})
		connect(t, req, bind(t, router, ep()))
		mustSend(t, ctx, req, "q")
		eq(t, mustRecv(t, ctx, router), "r1", "", "q")
		mustSend(t, ctx, router, "r1", "", "a")
		eq(t, mustRecv(t, ctx, req), "a")

		// DEALER -> REP: REP strips up to the first empty frame and
		// restores the whole envelope on reply.
		rep := mk(t, Rep, Config{})
		dealer := mk(t, Dealer, Config{})
		connect(t, dealer, bind(t, rep, ep()))
		mustSend(t, ctx, dealer, "hop1", "", "body", "", "tail")
		eq(t, mustRecv(t, ctx, rep), "body", "", "tail")
		mustSend(t, ctx, rep, "answer")
		eq(t, mustRecv(t, ctx, dealer), "hop1", "", "answer")
		// A message with no delimiter is not a request: REP drops it.
		mustSend(t, ctx, dealer, "junk")
		mustSend(t, ctx, dealer, "", "real")
		eq(t, mustRecv(t, ctx, rep), "real")
	})
}

func TestPair(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		a := mk(t, Pair, Config{})
		b := mk(t, Pair, Config{})
		connect(t, b, bind(t, a, ep()))
		mustSend(t, ctx, a, "1")
		eq(t, mustRecv(t, ctx, b), "1")
		mustSend(t, ctx, b, "2")
		eq(t, mustRecv(t, ctx, a), "2")
	})
}

func TestRoundRobinAndFairQueue(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		push := mk(t, Push, Config{})
		var pulls []*Socket
		for range 3 {
			p := mk(t, Pull, Config{})
			connect(t, push, bind(t, p, ep()))
			pulls = append(pulls, p)
		}
		waitPeers(t, push, 3)
		for i := range 30 {
			mustSend(t, ctx, push, fmt.Sprint(i))
		}
		for _, p := range pulls {
			for range 10 {
				mustRecv(t, ctx, p)
			}
		}
		// Fair queue: one PULL, three PUSHes each sending 20. Once all
		// messages are queued at the receiver, Recv takes them from the
		// three connections in turn rather than draining one first.
		pull := mk(t, Pull, Config{RecvHWM: 20})
		addr := bind(t, pull, ep())
		var pushes []*Socket
		for range 3 {
			s := mk(t, Push, Config{})
			connect(t, s, addr)
			pushes = append(pushes, s)
		}
		waitPeers(t, pull, 3)
		for i, s := range pushes {
			for j := range 20 {
				mustSend(t, ctx, s, fmt.Sprint(i), fmt.Sprint(j))
			}
		}
		testutil.WaitFor(t, "all messages queued", 0, func() bool { return pull.queued() == 60 })
		next := map[string]int{}
		for round := range 20 {
			seen := map[string]bool{}
			for range 3 {
				got := mustRecv(t, ctx, pull)
				if seen[got[0]] {
					t.Fatalf("round %d: sender %s twice", round, got[0])
				}
				seen[got[0]] = true
				if got[1] != fmt.Sprint(next[got[0]]) {
					t.Fatalf("sender %s: got message %s, want %d", got[0], got[1], next[got[0]])
				}
				next[got[0]]++
			}
		}
	})
}
