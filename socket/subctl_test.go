package socket

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/internal/zmtp"
)

// stuckPub is a hand-driven PUB that completes the ZMTP handshake and then
// reads nothing until the test says so. It keeps the subscriptions it has
// read as libzmq's PUB does, one per prefix, and treats a second
// SUBSCRIBE of a prefix it holds, or a CANCEL of one it does not, as an
// error: we must tell a peer only of a prefix's first Subscribe and last
// Unsubscribe.
type stuckPub struct {
	addr  string
	conns chan *rawPeer // each accepted connection, after its handshake
	state map[string]int
}

var stuckSeq atomic.Int32

// newStuckPub listens on an inproc endpoint, whose fixed buffer (memBuf)
// makes a peer that does not read stall our writer after a known number
// of bytes; each connection handshakes as a PUB speaking ZMTP 3.0 (zmtp30)
// or 3.1.
func newStuckPub(t *testing.T, zmtp30 bool) *stuckPub {
	t.Helper()
	e, err := parseEndpoint(fmt.Sprintf("inproc://stuck-%s-%d", t.Name(), stuckSeq.Add(1)), true)
	if err != nil {
		t.Fatal(err)
	}
	l, ep, err := listen(e)
	if err != nil {
		t.Fatal(err)
	}
	sp := &stuckPub{addr: ep, conns: make(chan *rawPeer, 4), state: map[string]int{}}
	done := make(chan struct{})
	t.Cleanup(func() {
		l.Close()
		<-done
		close(sp.conns)
		for p := range sp.conns {
			p.c.Close()
		}
	})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p := &rawPeer{c: c, r: zmtp.NewReader(c, 0), w: zmtp.NewWriter(c, 0)}
			p.r.MaxCmdSize = 64 << 20
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := zmtp.Handshake(p.r, p.w, zmtp.Config{SocketType: "PUB", ZMTP30: zmtp30}); err != nil {
				c.Close()
				continue
			}
			_ = c.SetDeadline(time.Time{})
			select {
			case sp.conns <- p:
			default:
				c.Close()
			}
		}
	}()
	return sp
}

// next returns the next accepted connection.
func (sp *stuckPub) next(t *testing.T) *rawPeer {
	t.Helper()
	select {
	case p := <-sp.conns:
		t.Cleanup(func() { p.c.Close() })
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no connection to the stuck PUB")
		return nil
	}
}

// readUntil reads subscription traffic from p (commands or ZMTP 3.0
// \x01/\x00 messages) into sp.state until it equals want; data messages
// are counted. It fails the test when p's stream ends or stays silent.
func (sp *stuckPub) readUntil(t *testing.T, p *rawPeer, want map[string]int) (data int) {
	t.Helper()
	for !maps.Equal(sp.state, want) {
		_ = p.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := sp.readOne(p, &data); err != nil {
			t.Fatalf("stuck PUB read: %v; state %v, want %v", err, summary(sp.state), summary(want))
		}
	}
	return data
}

func (sp *stuckPub) readOne(p *rawPeer, data *int) error {
	frames, cmd, err := p.r.Next(nil)
	if err != nil {
		return err
	}
	var add bool
	var topic []byte
	switch {
	case frames == nil && (cmd.Name == zmtp.CmdSubscribe || cmd.Name == zmtp.CmdCancel):
		add, topic = cmd.Name == zmtp.CmdSubscribe, cmd.Body
	case frames == nil:
		return nil
	case len(frames) == 1 && len(frames[0]) > 0 && frames[0][0] <= 1:
		add, topic = frames[0][0] == 1, frames[0][1:]
	default:
		*data++
		return nil
	}
	k := string(topic)
	switch {
	case add && sp.state[k] == 0:
		sp.state[k] = 1
	case add:
		return fmt.Errorf("SUBSCRIBE of %.20q, which is already subscribed", k)
	case sp.state[k] == 0:
		return fmt.Errorf("CANCEL of %.20q, which is not subscribed", k)
	default:
		delete(sp.state, k)
	}
	return nil
}

// closeAndDrain closes s while read consumes what s's linger flushes to
// p, until EOF; then p hangs up so that Close need not wait out the
// linger time.
func closeAndDrain(t *testing.T, s *Socket, p *rawPeer, read func() error) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	_ = p.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var err error
	for err == nil {
		err = read()
	}
	if err != io.EOF {
		t.Errorf("stuck peer: %v, want EOF", err)
	}
	p.c.Close()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// summary shortens big topics for failure messages.
func summary(m map[string]int) string {
	var b strings.Builder
	for k, n := range m {
		fmt.Fprintf(&b, "%.16q(%d bytes):%d ", k, len(k), n)
	}
	return b.String()
}

// ourSubs returns a SUB or XSUB socket's subscriptions with their counts.
func (s *Socket) ourSubs() map[string]int {
	m := map[string]int{}
	s.subs.each(func(t string, n int) { m[t] = n })
	return m
}

// peerAt returns s's peer connected to ep, or nil.
func (s *Socket) peerAt(ep string) *peer {
	for _, p := range *s.peers.Load() {
		if p.endpoint == ep {
			return p
		}
	}
	return nil
}

// bigTopics returns n distinct topics of size bytes.
func bigTopics(n, size int) [][]byte {
	ts := make([][]byte, n)
	for i := range ts {
		ts[i] = bytes.Repeat([]byte{'A' + byte(i%26)}, size)
		copy(ts[i], fmt.Sprintf("big%03d.", i))
	}
	return ts
}

// returnsWithin runs fn in a goroutine and fails the test if it has not
// returned by the end of ctx (a hang detector, not a timing assertion).
func returnsWithin(t *testing.T, ctx context.Context, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-ctx.Done():
		t.Fatalf("%s blocked on a peer that does not read", what)
	}
}

// TestSubscribeNotBlockedByStuckPeer: a SUB connected to a PUB that never
// reads (a raw ZMTP 3.0 peer, so subscriptions travel as \x01 messages)
// and to a healthy PUB over TCP. Subscribe and Unsubscribe return although our
// writer to the stuck peer is stalled; the healthy PUB gets the
// subscriptions (as SUBSCRIBE/CANCEL commands) and filters by them; what
// waits for the stuck peer stays bounded by the distinct topics however
// much churn there is; and once the stuck peer reads again it ends with
// exactly our subscriptions.
func TestSubscribeNotBlockedByStuckPeer(t *testing.T) {
	ctx := tctx(t)
	stuck := newStuckPub(t, true)
	pub := mk(t, Pub, Config{})
	pubAddr := bind(t, pub, "tcp://127.0.0.1:0")
	sub := mk(t, Sub, Config{SendHWM: 1})
	connect(t, sub, stuck.addr)
	connect(t, sub, pubAddr)
	waitPeers(t, sub, 2)
	waitPeers(t, pub, 1)
	raw := stuck.next(t)

	// Several times what the stuck connection buffers (memBuf, the
	// writer's buffer and SendHWM): the old engine blocked in Subscribe
	// here.
	big := bigTopics(24, 64<<10)
	var churn [][]byte
	for i := range 10 {
		churn = append(churn, []byte(fmt.Sprintf("churn.%d.", i)))
	}
	returnsWithin(t, ctx, "Subscribe", func() error {
		for _, tp := range big {
			if err := sub.Subscribe(tp); err != nil {
				return err
			}
		}
		for i := range 5000 {
			tp := churn[i%len(churn)]
			if err := sub.Subscribe(tp); err != nil {
				return err
			}
			if err := sub.Unsubscribe(tp); err != nil {
				return err
			}
			// Unsubscribing what we do not hold tells nobody.
			if err := sub.Unsubscribe([]byte("never.")); err != nil {
				return err
			}
		}
		for _, tp := range []string{"news.", "news.", "x."} {
			if err := sub.Subscribe([]byte(tp)); err != nil {
				return err
			}
		}
		return sub.Unsubscribe([]byte("news."))
	})
	sp := sub.peerAt(stuck.addr)
	if sp == nil {
		t.Fatal("stuck peer gone")
	}
	if n, max := sp.subctl.size(), len(big)+len(churn)+2; n > max {
		t.Fatalf("%d topics wait for the stuck peer, more than the %d distinct ones", n, max)
	}
	want := map[string]int{"news.": 1, "x.": 1}
	for _, tp := range big {
		want[string(tp)] = 1
	}
	if got := sub.ourSubs(); !maps.Equal(got, want) {
		t.Fatalf("our subscriptions %s, want %s", summary(got), summary(want))
	}

	// The healthy PUB has exactly our subscriptions and filters by them.
	pp := (*pub.peers.Load())[0]
	testutil.WaitFor(t, "healthy PUB's subscriptions", 0, func() bool {
		got := map[string]int{}
		pp.subs.each(func(t string, n int) { got[t] = n })
		return maps.Equal(got, want)
	})
	if pp.subs.match([]byte("churn.1.data")) || pp.subs.match([]byte("never.data")) {
		t.Fatal("healthy PUB kept a cancelled subscription")
	}
	mustSend(t, ctx, pub, "churn.1.data")
	mustSend(t, ctx, pub, "news.1")
	eq(t, mustRecv(t, ctx, sub), "news.1")
	if st := pub.Stats(); st.Dropped != 0 {
		t.Fatalf("healthy PUB dropped: %+v", st)
	}

	// Released, the stuck peer reads our net subscriptions; the changes
	// it still had to receive (and nothing else) follow.
	stuck.readUntil(t, raw, want)
	var data int
	closeAndDrain(t, sub, raw, func() error { return stuck.readOne(raw, &data) })
	if !maps.Equal(stuck.state, want) {
		t.Fatalf("stuck PUB ended with %s, want %s", summary(stuck.state), summary(want))
	}
}

// TestSubscriptionsReplayedOnceAfterStall: a peer whose connection was
// stalled while our subscriptions changed, and which then reconnects, gets
// our subscriptions exactly once (from the replay), with their counts.
func TestSubscriptionsReplayedOnceAfterStall(t *testing.T) {
	ctx := tctx(t)
	stuck := newStuckPub(t, false)
	sub := mk(t, Sub, Config{SendHWM: 1, ReconnectInterval: time.Millisecond})
	connect(t, sub, stuck.addr)
	raw := stuck.next(t)
	waitPeers(t, sub, 1)
	big := bigTopics(16, 64<<10)
	returnsWithin(t, ctx, "Subscribe", func() error {
		for _, tp := range big {
			if err := sub.Subscribe(tp); err != nil {
				return err
			}
		}
		for i := range 1000 {
			if err := sub.Subscribe([]byte("a")); err != nil {
				return err
			}
			if i%2 == 0 {
				if err := sub.Unsubscribe([]byte("a")); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if n := sub.ourSubs()["a"]; n != 500 {
		t.Fatalf("we hold %d subscriptions of a, want 500", n)
	}
	want := map[string]int{"a": 1} // a peer holds a prefix once
	for _, tp := range big {
		want[string(tp)] = 1
	}
	// The stalled connection goes; the SUB reconnects and replays.
	raw.c.Close()
	raw = stuck.next(t)
	stuck.state = map[string]int{}
	stuck.readUntil(t, raw, want)
	// Nothing more than the replay: a marker change comes next.
	if err := sub.Subscribe([]byte("marker")); err != nil {
		t.Fatal(err)
	}
	want["marker"] = 1
	stuck.readUntil(t, raw, want)
}

// TestXSubSendNotBlockedByStuckPeer: an XSUB's data messages fan out like
// PUB's: a peer that does not read makes Send drop for it (counted, with
// EventDropped), never block, and the healthy peer gets every message. A
// subscription sent meanwhile reaches both peers, once.
func TestXSubSendNotBlockedByStuckPeer(t *testing.T) {
	ctx := tctx(t)
	const hwm = 2
	xsub := mk(t, XSub, Config{SendHWM: hwm})
	addr := bind(t, xsub, "inproc://xsub-"+t.Name())
	// The stuck peer: a raw PUB over inproc that reads nothing for now.
	e, _ := parseEndpoint(addr, false)
	c, err := dial(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	raw := &rawPeer{c: c, r: zmtp.NewReader(c, 0), w: zmtp.NewWriter(c, 0)}
	if _, err := zmtp.Handshake(raw.r, raw.w, zmtp.Config{SocketType: "PUB"}); err != nil {
		t.Fatal(err)
	}
	waitPeers(t, xsub, 1)

	const size = 64 << 10
	msg := func(i int) Msg {
		b := bytes.Repeat([]byte("d"), size) // not a subscription message
		copy(b, fmt.Sprintf("msg-%d.", i))
		return NewMsg(b)
	}
	// Far more than the stuck connection holds: the old engine blocked.
	const stuffed = 64
	returnsWithin(t, ctx, "XSUB Send", func() error {
		for i := range stuffed {
			if err := xsub.Send(ctx, msg(i)); err != nil {
				return err
			}
		}
		return nil
	})
	waitEv(t, xsub, EventDropped)
	if err := xsub.Send(ctx, NewMsgString("\x01abc")); err != nil {
		t.Fatal(err)
	}
	xpub := mk(t, XPub, Config{})
	connect(t, xpub, addr)
	waitPeers(t, xsub, 2)
	// The new peer gets the subscription once, from its replay.
	eq(t, mustRecv(t, ctx, xpub), "\x01abc")
	const n = 50
	for i := range n {
		if err := xsub.Send(ctx, msg(stuffed+i)); err != nil {
			t.Fatal(err)
		}
		m, err := xpub.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("msg-%d.", stuffed+i); !bytes.HasPrefix(m.Frames[0], []byte(want)) {
			t.Fatalf("healthy peer got %.10q, want %s", m.Frames[0], want)
		}
	}
	// The stuck peer holds at most its connection's buffer (memBuf), the
	// writer's buffer and one message in hand, and its queue.
	maxHeld := uint64((memBuf+64<<10)/size + 1 + hwm + 2)
	if d := xsub.Stats().Dropped; d+maxHeld < stuffed+n {
		t.Fatalf("%d drops of %d messages for the stuck peer", d, stuffed+n)
	}
	// Released, the stuck peer gets its data and the subscription; once
	// the XSUB has closed, what it got and what was dropped add up.
	sp := &stuckPub{state: map[string]int{}}
	data := sp.readUntil(t, raw, map[string]int{"abc": 1})
	closeAndDrain(t, xsub, raw, func() error { return sp.readOne(raw, &data) })
	dropped := xsub.Stats().Dropped
	if uint64(data)+dropped != stuffed+n {
		t.Fatalf("stuck peer got %d messages and %d were dropped, of %d", data, dropped, stuffed+n)
	}
	if !maps.Equal(sp.state, map[string]int{"abc": 1}) {
		t.Fatalf("stuck peer ended with %s", summary(sp.state))
	}
}

// TestLingerSendsPendingSubscriptions closes an XSUB whose writer is
// stuck behind a peer that does not read, with a subscription change still
// pending: once the peer reads again, the change is written during linger.
func TestLingerSendsPendingSubscriptions(t *testing.T) {
	ctx := tctx(t)
	payload := bytes.Repeat([]byte("d"), 64<<10)
	for i := range 10 {
		xpub := mk(t, XPub, Config{RecvHWM: 1})
		addr := bind(t, xpub, fmt.Sprintf("inproc://linger-subs-%d", i))
		xsub := mk(t, XSub, Config{Linger: 10 * time.Second})
		connect(t, xsub, addr)
		waitEv(t, xsub, EventConnected)
		// Fill the XPUB's queue and the connection's buffer.
		for range 16 {
			if err := xsub.Send(ctx, NewMsg(payload)); err != nil {
				t.Fatal(err)
			}
		}
		if err := xsub.Send(ctx, NewMsg([]byte("\x01topic"))); err != nil {
			t.Fatal(err)
		}
		closed := make(chan struct{})
		go func() { xsub.Close(); close(closed) }()
		// Read everything until the XSUB has closed: the data must be read
		// for its linger to finish.
		got, n := false, 0
		for {
			m, err := xpub.Recv(withTimeout(ctx, 50))
			if err == nil {
				n++
				got = got || string(m.Frames[0]) == "\x01topic"
				continue
			}
			select {
			case <-closed:
			default:
				continue
			}
			break
		}
		if !got {
			t.Fatalf("round %d: the subscription never arrived (%d messages)", i, n)
		}
		xpub.Close()
	}
}
