package socket

import (
	"fmt"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/internal/zmtp"
)

// TestSubscribeTellsFirstAndLast: peers hear of a prefix's first
// Subscribe and of the Unsubscribe that removes its last one, nothing in
// between, as libzmq's SUB does: a libzmq PUB keeps one subscription per
// prefix and peer, so a CANCEL sent while we still hold the prefix would
// cut us off from it.
func TestSubscribeTellsFirstAndLast(t *testing.T) {
	peer := newStuckPub(t, false)
	sub := mk(t, Sub, Config{})
	connect(t, sub, peer.addr)
	raw := peer.next(t)
	waitPeers(t, sub, 1)
	do := func(add bool, topic string) {
		t.Helper()
		var err error
		if add {
			err = sub.Subscribe([]byte(topic))
		} else {
			err = sub.Unsubscribe([]byte(topic))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	do(true, "a")
	do(true, "a")
	do(false, "a") // we still hold one: the peer must keep it
	do(false, "never")
	// Each marker is sent after everything before it was read, so a
	// duplicate SUBSCRIBE or a premature CANCEL is read before the marker
	// that follows it.
	do(true, "m1")
	peer.readUntil(t, raw, map[string]int{"a": 1, "m1": 1})
	do(false, "a")
	do(true, "m2")
	peer.readUntil(t, raw, map[string]int{"m1": 1, "m2": 1})
	do(true, "m3")
	peer.readUntil(t, raw, map[string]int{"m1": 1, "m2": 1, "m3": 1})
}

// TestSubCtlCoalesces: pending subscription changes are one net count per
// topic, however many changes there are.
func TestSubCtlCoalesces(t *testing.T) {
	var c subCtl
	c.init()
	for i := range 100000 {
		tp := fmt.Sprint("t", i%7)
		c.change(tp, 1)
		if i%3 != 0 {
			c.change(tp, -1)
		}
	}
	if n := c.size(); n > 7 {
		t.Fatalf("%d pending topics, want <= 7", n)
	}
	m := c.take()
	total := 0
	for _, d := range m {
		total += d
	}
	if total != 100000/3+1 {
		t.Fatalf("net count %d, want %d", total, 100000/3+1)
	}
	c.done(m)
	if c.size() != 0 {
		t.Fatal("take left changes behind")
	}
	c.change("x", 1)
	c.change("x", -1)
	if c.size() != 0 {
		t.Fatal("a change and its inverse left an entry")
	}
}

// TestPubHoldsPrefixOncePerPeer: as libzmq's PUB and XPUB do, ours keep a
// prefix once per peer. libzmq's SUB sends SUBSCRIBE for every Subscribe
// but CANCEL only for the last Unsubscribe, so after SUBSCRIBE a,
// SUBSCRIBE a, CANCEL a the peer holds nothing: a PUB stops sending it a
// messages, and an XPUB reports the prefix gone.
func TestPubHoldsPrefixOncePerPeer(t *testing.T) {
	for _, kind := range []Kind{Pub, XPub} {
		t.Run(kind.String(), func(t *testing.T) {
			ctx := tctx(t)
			pub := mk(t, kind, Config{})
			addr := bind(t, pub, "tcp://127.0.0.1:0")
			p := rawConnect(t, addr, "SUB")
			waitPeers(t, pub, 1)
			for _, c := range []struct{ name, topic string }{
				{zmtp.CmdSubscribe, "a"}, {zmtp.CmdSubscribe, "a"}, {zmtp.CmdCancel, "a"},
				{zmtp.CmdSubscribe, "m"}, // a marker: the reader has applied what came before
			} {
				if err := p.w.WriteCommand(c.name, []byte(c.topic)); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.w.Flush(); err != nil {
				t.Fatal(err)
			}
			pp := (*pub.peers.Load())[0]
			testutil.WaitFor(t, "the marker subscription", 0, func() bool { return pp.subs.match([]byte("m")) })
			if pp.subs.match([]byte("a.x")) {
				t.Fatal("the peer still holds a after its CANCEL")
			}
			if kind == XPub {
				eq(t, mustRecv(t, ctx, pub), "\x01a")
				eq(t, mustRecv(t, ctx, pub), "\x00a")
				eq(t, mustRecv(t, ctx, pub), "\x01m")
			}
			mustSend(t, ctx, pub, "a.x")
			mustSend(t, ctx, pub, "m.x")
			_ = p.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			frames, _, err := p.r.Next(nil)
			if err != nil {
				t.Fatal(err)
			}
			if string(frames[0]) != "m.x" {
				t.Fatalf("peer got %q, want m.x", frames[0])
			}
		})
	}
}

// TestSubscribeWhilePeersConnect: subscriptions made while peers connect
// reach each peer exactly once, from its replay or as a change, never
// both (the stuck PUB fails on a second SUBSCRIBE of a prefix).
func TestSubscribeWhilePeersConnect(t *testing.T) {
	sub := mk(t, Sub, Config{})
	const nPeers, nTopics = 3, 200
	var peers []*stuckPub
	for i := range nPeers {
		peers = append(peers, newStuckPub(t, i%2 == 0))
	}
	done := make(chan error, 1)
	go func() {
		for i := range nTopics {
			if err := sub.Subscribe([]byte(fmt.Sprintf("t%03d", i))); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for _, sp := range peers {
		connect(t, sub, sp.addr)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for i := range nTopics {
		want[fmt.Sprintf("t%03d", i)] = 1
	}
	raws := make([]*rawPeer, nPeers)
	for i, sp := range peers {
		raws[i] = sp.next(t)
		sp.readUntil(t, raws[i], want)
	}
	// A duplicate still on its way would come before the second marker.
	for _, m := range []string{"m1", "m2"} {
		if err := sub.Subscribe([]byte(m)); err != nil {
			t.Fatal(err)
		}
		want[m] = 1
		for i, sp := range peers {
			sp.readUntil(t, raws[i], want)
		}
	}
}

// TestXSubFiltersIncoming: like libzmq's, an XSUB passes on only the
// messages matching its subscriptions, even from a publisher that sends
// everything.
func TestXSubFiltersIncoming(t *testing.T) {
	ctx := tctx(t)
	xsub := mk(t, XSub, Config{})
	ep := bind(t, xsub, "tcp://127.0.0.1:0")
	pub := rawConnect(t, ep, "PUB")
	if err := xsub.Send(ctx, NewMsg([]byte("\x01A"))); err != nil {
		t.Fatal(err)
	}
	_ = pub.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, cmd, err := pub.r.Next(nil)
	if err != nil || cmd.Name != zmtp.CmdSubscribe || string(cmd.Body) != "A" {
		t.Fatalf("publisher read %+v, %v; want SUBSCRIBE A", cmd, err)
	}
	for _, m := range []string{"B1", "A1", "B2", "A2"} {
		if err := pub.w.WriteMessage([][]byte{[]byte(m)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.w.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"A1", "A2"} {
		if got := mustRecv(t, ctx, xsub); len(got) != 1 || got[0] != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}
