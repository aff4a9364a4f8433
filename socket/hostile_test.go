package socket

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/internal/zmtp"
)

// rawPeer is a hand-driven ZMTP peer for protocol-level tests.
type rawPeer struct {
	c net.Conn
	r *zmtp.Reader
	w *zmtp.Writer
}

func rawDial(t *testing.T, ep string) *rawPeer {
	t.Helper()
	addr := strings.TrimPrefix(ep, "tcp://")
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawPeer{c: c, r: zmtp.NewReader(c, 0), w: zmtp.NewWriter(c, 0)}
}

func rawConnect(t *testing.T, ep, typ string) *rawPeer {
	t.Helper()
	p := rawDial(t, ep)
	_ = p.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := zmtp.Handshake(p.r, p.w, zmtp.Config{SocketType: typ}); err != nil {
		t.Fatalf("raw handshake: %v", err)
	}
	_ = p.c.SetDeadline(time.Time{})
	return p
}

func (p *rawPeer) write(t *testing.T, b []byte) {
	t.Helper()
	if _, err := p.c.Write(b); err != nil {
		t.Fatal(err)
	}
}

func greeting(mech string) []byte {
	g := zmtp.Greeting{Major: 3, Minor: 1, Mechanism: mech}.Marshal()
	return g[:]
}

func cmdFrame(body []byte) []byte {
	return append([]byte{zmtp.FlagCommand, byte(len(body))}, body...)
}

func TestHostileHandshakes(t *testing.T) {
	ctx := tctx(t)
	pull := mk(t, Pull, Config{HandshakeTimeout: 200 * time.Millisecond, MaxMsgSize: 1 << 20})
	addr := bind(t, pull, "tcp://127.0.0.1:0")

	// A silent client holds a connection open but must not block others.
	silent := rawDial(t, addr)
	push := mk(t, Push, Config{})
	connect(t, push, addr)
	mustSend(t, ctx, push, "through")
	eq(t, mustRecv(t, ctx, pull), "through")
	ev := waitEv(t, pull, EventHandshakeFailed)
	if ev.Err == nil {
		t.Fatal("handshake failure without reason")
	}
	_ = silent

	cases := []struct {
		name string
		data []byte
	}{
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + strings.Repeat(" ", 64))},
		{"zmtp2", append([]byte{0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 1, 5}, make([]byte, 52)...)},
		{"ready-metadata-single-zero", append(greeting("NULL"), cmdFrame([]byte("\x05READY\x00"))...)},
		{"ready-truncated-value", append(greeting("NULL"), cmdFrame([]byte("\x05READY\x0bSocket-Type\xff\xff\xff\xffPUSH"))...)},
		{"ready-no-type", append(greeting("NULL"), cmdFrame([]byte("\x05READY"))...)},
		{"wrong-type", append(greeting("NULL"), cmdFrame([]byte("\x05READY\x0bSocket-Type\x00\x00\x00\x03PUB"))...)},
		{"plain-to-null", append(greeting("PLAIN"), cmdFrame([]byte("\x05HELLO\x00\x00"))...)},
		{"huge-command", append(greeting("NULL"), 0x06, 0x40, 0, 0, 0, 0, 0, 0, 0)},
		{"message-first", append(greeting("NULL"), 0x00, 0x01, 'x')},
		{"reserved-flags", append(greeting("NULL"), 0xf0, 0x01, 'x')},
		// Empty data frames before the handshake: refused at the second
		// frame, not read (and held) up to MaxMsgSize.
		{"frame-flood-before-handshake", append(greeting("NULL"), bytes.Repeat([]byte{0x01, 0x00}, 1<<15)...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := pull.Stats().HandshakeFailures
			p := rawDial(t, addr)
			p.write(t, tc.data)
			testutil.WaitFor(t, "handshake failure", 0, func() bool { return pull.Stats().HandshakeFailures > before })
			if pull.Stats().Peers != 1 {
				t.Fatalf("peers = %d", pull.Stats().Peers)
			}
		})
	}
	// A frame claiming 2^62 bytes after a valid handshake disconnects that
	// peer without allocating, and the socket keeps working.
	p := rawConnect(t, addr, "PUSH")
	waitPeers(t, pull, 2)
	hdr := []byte{zmtp.FlagLong, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint64(hdr[1:], 1<<62)
	p.write(t, hdr)
	testutil.WaitFor(t, "too-large disconnect", 0, func() bool { return pull.Stats().TooLarge == 1 })
	mustSend(t, ctx, push, "still")
	eq(t, mustRecv(t, ctx, pull), "still")

	// A flood of empty frames in one message is bounded too.
	p = rawConnect(t, addr, "PUSH")
	waitPeers(t, pull, 2)
	p.write(t, bytes.Repeat([]byte{zmtp.FlagMore, 0}, 40000))
	testutil.WaitFor(t, "frame-flood disconnect", 0, func() bool { return pull.Stats().TooLarge == 2 })

	// Even with no size limit, a lying length allocates only as data
	// arrives: the peer disappears and nothing breaks.
	unl := mk(t, Pull, Config{MaxMsgSize: -1})
	p = rawConnect(t, bind(t, unl, "tcp://127.0.0.1:0"), "PUSH")
	waitPeers(t, unl, 1)
	p.write(t, append(hdr, "some bytes"...))
	p.c.Close()
	waitPeers(t, unl, 0)
}

func TestMaxMsgSize(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		pull := mk(t, Pull, Config{MaxMsgSize: 1000})
		push := mk(t, Push, Config{})
		connect(t, push, bind(t, pull, ep()))
		mustSend(t, ctx, push, strings.Repeat("a", 500), strings.Repeat("b", 500))
		if m := mustRecv(t, ctx, pull); len(m) != 2 {
			t.Fatal(m)
		}
		mustSend(t, ctx, push, strings.Repeat("a", 500), strings.Repeat("b", 501))
		ev := waitEv(t, pull, EventDisconnected)
		if !errors.Is(ev.Err, ErrMsgTooLarge) {
			t.Fatalf("disconnect reason %v", ev.Err)
		}
		if pull.Stats().TooLarge != 1 {
			t.Fatalf("stats %+v", pull.Stats())
		}
	})
}

func TestPlain(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		auth := func(u, p string) bool { return u == "admin" && p == "secret" }
		rep := mk(t, Rep, Config{PlainAuth: auth})
		addr := bind(t, rep, ep())
		good := mk(t, Req, Config{PlainUsername: "admin", PlainPassword: "secret"})
		connect(t, good, addr)
		mustSend(t, ctx, good, "hi")
		eq(t, mustRecv(t, ctx, rep), "hi")
		mustSend(t, ctx, rep, "ok")
		eq(t, mustRecv(t, ctx, good), "ok")

		bad := mk(t, Req, Config{PlainUsername: "admin", PlainPassword: "wrong"})
		connect(t, bad, addr)
		ev := waitEv(t, bad, EventHandshakeFailed)
		if !errors.Is(ev.Err, zmtp.ErrPeerError) {
			t.Fatalf("client side: %v", ev.Err)
		}
		ev = waitEv(t, rep, EventHandshakeFailed)
		if !errors.Is(ev.Err, zmtp.ErrAuth) {
			t.Fatalf("server side: %v", ev.Err)
		}
		null := mk(t, Req, Config{})
		connect(t, null, addr)
		ev = waitEv(t, null, EventHandshakeFailed)
		if !errors.Is(ev.Err, zmtp.ErrMechanism) {
			t.Fatalf("NULL client: %v", ev.Err)
		}
		if rep.Stats().Peers != 1 {
			t.Fatalf("peers %d", rep.Stats().Peers)
		}
	})
}

// TestFrameFloodRefusedAtOnce: data frames before the handshake completes
// are refused at the second frame (a size error), not read until the
// handshake timeout while their headers pile up in memory.
func TestFrameFloodRefusedAtOnce(t *testing.T) {
	pull := mk(t, Pull, Config{HandshakeTimeout: time.Minute})
	addr := bind(t, pull, "tcp://127.0.0.1:0")
	p := rawDial(t, addr)
	p.write(t, append(greeting("NULL"), bytes.Repeat([]byte{0x01, 0x00}, 1<<15)...))
	ev := waitEv(t, pull, EventHandshakeFailed)
	if !errors.Is(ev.Err, zmtp.ErrTooLarge) {
		t.Fatalf("handshake failed with %v, want a size error", ev.Err)
	}
}

// TestSubscriptionFloodDisconnects: a peer that sends more distinct
// subscriptions than a PUB keeps per peer is disconnected, and the PUB
// keeps serving its other subscribers.
func TestSubscriptionFloodDisconnects(t *testing.T) {
	ctx := tctx(t)
	pub := mk(t, Pub, Config{})
	addr := bind(t, pub, "tcp://127.0.0.1:0")
	good := mk(t, Sub, Config{})
	if err := good.Subscribe([]byte("")); err != nil {
		t.Fatal(err)
	}
	connect(t, good, addr)
	waitEv(t, pub, EventAccepted)

	p := rawConnect(t, addr, "SUB")
	waitEv(t, pub, EventAccepted)
	for i := 0; i <= maxPeerSubs; i++ {
		if err := p.w.WriteCommand(zmtp.CmdSubscribe, []byte(fmt.Sprintf("topic-%06d", i))); err != nil {
			break // the PUB may already have hung up
		}
	}
	p.w.Flush()
	ev := waitEv(t, pub, EventDisconnected)
	if !errors.Is(ev.Err, errTooManySubs) {
		t.Fatalf("flooding peer dropped with %v, want errTooManySubs", ev.Err)
	}
	// The well-behaved subscriber still gets messages.
	for {
		mustSend(t, ctx, pub, "still-here")
		rctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		m, err := good.Recv(rctx)
		cancel()
		if err == nil {
			if string(m.Frames[0]) != "still-here" {
				t.Fatalf("got %q", m.Frames[0])
			}
			break
		}
	}
}

// TestPendingHandshakesBounded: silent connections that never finish
// their handshake are capped; past the cap the oldest are evicted, so a
// real peer gets through while the silent ones are still open.
func TestPendingHandshakesBounded(t *testing.T) {
	pull := mk(t, Pull, Config{HandshakeTimeout: time.Minute})
	addr := bind(t, pull, "tcp://127.0.0.1:0")
	var silent []net.Conn
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	for i := 0; i < maxPendingHandshakes+64; i++ {
		c, err := net.Dial("tcp", strings.TrimPrefix(addr, "tcp://"))
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	ev := waitEv(t, pull, EventHandshakeFailed)
	if !errors.Is(ev.Err, ErrRefused) {
		t.Fatalf("handshake failed with %v, want ErrRefused", ev.Err)
	}
	ctx := tctx(t)
	push := mk(t, Push, Config{})
	connect(t, push, addr)
	mustSend(t, ctx, push, "through")
	eq(t, mustRecv(t, ctx, pull), "through")
}
