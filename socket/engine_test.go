package socket

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
)

func TestHWMAndTimeouts(t *testing.T) {
	ctx := tctx(t)
	// No peer: PUSH blocks until the deadline.
	push := mk(t, Push, Config{SendTimeout: 20 * time.Millisecond})
	if err := push.Send(context.Background(), NewMsgString("x")); !isTimeout(err) {
		t.Fatalf("Send with SendTimeout and no peer: %v", err)
	}
	c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := push.Send(c, NewMsgString("x")); !isTimeout(err) {
		t.Fatalf("Send with ctx deadline: %v", err)
	}
	c, cancel = context.WithCancel(ctx)
	cancel()
	if err := push.Send(c, NewMsgString("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Send with cancelled ctx: %v", err)
	}
	pull := mk(t, Pull, Config{RecvTimeout: 20 * time.Millisecond, RecvHWM: 1})
	if _, err := pull.Recv(context.Background()); !isTimeout(err) {
		t.Fatalf("Recv with RecvTimeout: %v", err)
	}

	// A peer that does not read: the queue fills, then Send blocks until
	// its deadline.
	push2 := mk(t, Push, Config{SendHWM: 2})
	connect(t, push2, bind(t, pull, "tcp://127.0.0.1:0"))
	waitPeers(t, push2, 1)
	big := make([]byte, 256<<10)
	var err error
	for i := 0; i < 10000 && err == nil; i++ {
		c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err = push2.Send(c, NewMsg(big))
		cancel()
	}
	if !isTimeout(err) {
		t.Fatalf("Send to a full peer: %v", err)
	}
	// Once the receiver reads, sending resumes.
	if _, err := pull.Recv(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "room", 0, func() bool {
		c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := pull.Recv(c); err != nil && !isTimeout(err) {
			t.Fatal(err)
		}
		return push2.Send(c, NewMsgString("more")) == nil
	})
}

func TestSlowSubscriberIsolation(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		pub := mk(t, Pub, Config{SendHWM: 10})
		fast := mk(t, Sub, Config{})
		slow := mk(t, Sub, Config{RecvHWM: 1})
		addr := bind(t, pub, ep())
		for _, s := range []*Socket{fast, slow} {
			if err := s.Subscribe(nil); err != nil {
				t.Fatal(err)
			}
			connect(t, s, addr)
		}
		testutil.WaitFor(t, "subscriptions", 0, func() bool {
			mustSend(t, ctx, pub, "probe")
			_, err1 := fast.Recv(withTimeout(ctx, 20))
			_, err2 := slow.Recv(withTimeout(ctx, 20))
			return err1 == nil && err2 == nil
		})
		for fast.queued() > 0 {
			mustRecv(t, ctx, fast)
		}
		payload := bytes.Repeat([]byte("p"), 16<<10)
		const n = 1500
		for i := range n {
			if err := pub.Send(ctx, NewMsg([]byte("m"), payload)); err != nil {
				t.Fatal(err)
			}
			// Lock step with the fast subscriber: its queue never fills,
			// while the slow one (never reading) overflows.
			m, err := fast.Recv(ctx)
			if err != nil {
				t.Fatalf("fast subscriber, message %d: %v", i, err)
			}
			if string(m.Frames[0]) != "m" {
				t.Fatalf("fast subscriber got %q", m.Frames[0])
			}
		}
		if st := pub.Stats(); st.Dropped == 0 {
			t.Fatalf("no drops for the slow subscriber: %+v", st)
		}
		waitEv(t, pub, EventDropped)
	})
}

func TestKinds(t *testing.T) {
	for k := Pair; k <= XSub; k++ {
		got, err := ParseKind(strings.ToLower(k.String()))
		if err != nil || got != k {
			t.Fatalf("ParseKind(%s) = %v, %v", k, got, err)
		}
	}
	if _, err := ParseKind("STREAM"); err == nil {
		t.Fatal("STREAM parsed")
	}
	if _, err := New(Kind(99), Config{}); err == nil {
		t.Fatal("New(99) succeeded")
	}
	if _, err := New(Pull, Config{Identity: []byte{0, 1}}); err == nil {
		t.Fatal("reserved identity accepted")
	}
	if EventDropped.String() != "dropped" {
		t.Fatal(EventDropped.String())
	}
}

// The receive queue is filled in batches and its reader resumes only once
// it has drained to half: it must still never hold more than RecvHWM
// messages, and lose or reorder none.
func TestRecvHWMBatches(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		const hwm, n = 10, 500
		pull := mk(t, Pull, Config{RecvHWM: hwm})
		push := mk(t, Push, Config{})
		connect(t, push, bind(t, pull, ep()))
		waitPeers(t, push, 1)
		sent := make(chan error, 1)
		go func() {
			for i := range n {
				if err := push.Send(ctx, NewMsgString(fmt.Sprint(i), "x")); err != nil {
					sent <- err
					return
				}
			}
			sent <- nil
		}()
		testutil.WaitFor(t, "queue full", 0, func() bool { return pull.queued() == hwm })
		for i := range n {
			if q := pull.queued(); q > hwm {
				t.Fatalf("%d messages queued, RecvHWM %d", q, hwm)
			}
			eq(t, mustRecv(t, ctx, pull), fmt.Sprint(i), "x")
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
	})
}

// TestDepartedPeersMessagesBounded: messages left by peers that disconnect
// are kept for Recv only up to RecvHWM, however often a peer reconnects.
func TestDepartedPeersMessagesBounded(t *testing.T) {
	pull := mk(t, Pull, Config{RecvHWM: 10})
	addr := bind(t, pull, "tcp://127.0.0.1:0")
	for round := 0; round < 5; round++ {
		p := rawConnect(t, addr, "PUSH")
		for i := 0; i < 9; i++ {
			if err := p.w.WriteMessage([][]byte{[]byte(fmt.Sprintf("r%d-%d", round, i))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.w.Flush(); err != nil {
			t.Fatal(err)
		}
		p.c.Close()
		waitEv(t, pull, EventDisconnected)
	}
	// 45 messages were sent by peers that are gone; at most RecvHWM stay.
	deadline := time.Now().Add(5 * time.Second)
	for pull.Stats().Dropped < 35 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	got := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := pull.Recv(ctx)
		cancel()
		if err != nil {
			break
		}
		got++
	}
	if got > 10 || got+int(pull.Stats().Dropped) != 45 {
		t.Fatalf("received %d and dropped %d of 45; want at most 10 kept and the rest counted", got, pull.Stats().Dropped)
	}
}

// TestOrderKeptWhenPeerLeaves: a peer that sends and disconnects at once
// is received in order, while Recv races the removal of the peer.
func TestOrderKeptWhenPeerLeaves(t *testing.T) {
	ctx := tctx(t)
	pull := mk(t, Pull, Config{})
	addr := bind(t, pull, "tcp://127.0.0.1:0")
	for round := 0; round < 30; round++ {
		p := rawConnect(t, addr, "PUSH")
		const n = 50
		for i := 0; i < n; i++ {
			if err := p.w.WriteMessage([][]byte{[]byte(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.w.Flush(); err != nil {
			t.Fatal(err)
		}
		p.c.Close()
		for i := 0; i < n; i++ {
			m, err := pull.Recv(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(m.Frames[0]); got != fmt.Sprint(i) {
				t.Fatalf("round %d: message %d is %q: order lost when the peer left", round, i, got)
			}
		}
	}
}

// TestUndrainedEventsNeverBlock: nobody reads the PULL's events while
// peers come and go past the channel's capacity. The engine keeps
// working, and the events it could not deliver are counted.
func TestUndrainedEventsNeverBlock(t *testing.T) {
	ctx := tctx(t)
	pull := mk(t, Pull, Config{})
	ep := bind(t, pull, "inproc://undrained-events")
	for i := range 200 { // an accepted and a disconnected event each
		push := mk(t, Push, Config{})
		connect(t, push, ep)
		mustSend(t, ctx, push, fmt.Sprint(i))
		if got := mustRecv(t, ctx, pull); got[0] != fmt.Sprint(i) {
			t.Fatalf("got %q, want %d", got, i)
		}
		push.Close()
	}
	testutil.WaitFor(t, "events dropped", 0, func() bool { return pull.Stats().EventsDropped > 0 })
	push := mk(t, Push, Config{})
	connect(t, push, ep)
	mustSend(t, ctx, push, "still working")
	if got := mustRecv(t, ctx, pull); got[0] != "still working" {
		t.Fatalf("got %q", got)
	}
}

// TestKindOptionsRefused: an option another kind of socket uses is an
// error, not silently ignored.
func TestKindOptionsRefused(t *testing.T) {
	for _, c := range []struct {
		kind Kind
		cfg  Config
		name string
	}{
		{Sub, Config{PubNoDrop: true}, "PubNoDrop"},
		{Dealer, Config{RouterMandatory: true}, "RouterMandatory"},
		{Pub, Config{RouterHandover: true}, "RouterHandover"},
		{Rep, Config{ReqRelaxed: true}, "ReqRelaxed"},
		{Dealer, Config{ReqCorrelate: true}, "ReqCorrelate"},
		{Router, Config{SenderWrites: true}, "SenderWrites"},
	} {
		s, err := New(c.kind, c.cfg)
		if err == nil {
			s.Close()
			t.Fatalf("%s with %s: no error", c.kind, c.name)
		}
		if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), c.name) {
			t.Fatalf("%s with %s: %v", c.kind, c.name, err)
		}
	}
	for _, k := range []Kind{Pub, XPub} {
		s, err := New(k, Config{PubNoDrop: true})
		if err != nil {
			t.Fatalf("%s with PubNoDrop: %v", k, err)
		}
		s.Close()
	}
}
