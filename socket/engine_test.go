package socket

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	waitFor(t, "room", func() bool {
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
		waitFor(t, "subscriptions", func() bool {
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

func TestReconnectAfterRestart(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		cfg := Config{ReconnectInterval: 5 * time.Millisecond, ReconnectIntervalMax: 50 * time.Millisecond}
		pull := mk(t, Pull, Config{})
		addr := bind(t, pull, ep())
		push := mk(t, Push, cfg)
		connect(t, push, addr)
		pub := mk(t, Pub, Config{})
		pubAddr := bind(t, pub, ep())
		sub := mk(t, Sub, cfg)
		if err := sub.Subscribe([]byte("x")); err != nil {
			t.Fatal(err)
		}
		connect(t, sub, pubAddr)
		mustSend(t, ctx, push, "1")
		eq(t, mustRecv(t, ctx, pull), "1")

		for round := range 2 {
			pull.Close()
			pub.Close()
			pull = mk(t, Pull, Config{})
			bind(t, pull, addr)
			pub = mk(t, Pub, Config{})
			bind(t, pub, pubAddr)
			// Messages queued for the dead connection before it was noticed
			// are lost; probe until the new connection carries them.
			waitFor(t, "push reconnect", func() bool {
				if err := push.Send(withTimeout(ctx, 20), NewMsgString("probe")); err != nil {
					return false
				}
				_, err := pull.Recv(withTimeout(ctx, 20))
				return err == nil
			})
			// The subscription is replayed: x-messages get through.
			waitFor(t, "sub replay", func() bool {
				mustSend(t, ctx, pub, "y-no")
				mustSend(t, ctx, pub, fmt.Sprint("x", round))
				m, err := sub.Recv(withTimeout(ctx, 20))
				return err == nil && string(m.Frames[0]) == fmt.Sprint("x", round)
			})
		}
	})
}

func TestHeartbeatDeadPeer(t *testing.T) {
	// Our heartbeats: a peer that completes the handshake and then never
	// answers PINGs is disconnected.
	pull := mk(t, Pull, Config{HeartbeatInterval: 20 * time.Millisecond, HeartbeatTimeout: 60 * time.Millisecond})
	addr := bind(t, pull, "tcp://127.0.0.1:0")
	p := rawConnect(t, addr, "PUSH")
	waitEv(t, pull, EventAccepted)
	ev := waitEv(t, pull, EventDisconnected)
	if !errors.Is(ev.Err, errHeartbeat) {
		t.Fatalf("disconnect reason %v, want heartbeat timeout", ev.Err)
	}
	// The silent peer did receive PINGs.
	_ = p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, cmd, err := p.r.Next(nil)
	if err != nil || cmd.Name != zmtp.CmdPing {
		t.Fatalf("raw peer read %q, %v; want PING", cmd.Name, err)
	}

	// The peer's TTL: without heartbeats of our own, a peer announcing a
	// TTL of 100ms and then going silent is disconnected.
	pull2 := mk(t, Pull, Config{})
	addr2 := bind(t, pull2, "tcp://127.0.0.1:0")
	p2 := rawConnect(t, addr2, "PUSH")
	waitEv(t, pull2, EventAccepted)
	if err := p2.w.WriteCommand(zmtp.CmdPing, zmtp.AppendPing(nil, 1, []byte("ctx"))); err != nil {
		t.Fatal(err)
	}
	if err := p2.w.WriteMessage([][]byte{[]byte("after-ping")}); err != nil {
		t.Fatal(err)
	}
	if err := p2.w.Flush(); err != nil {
		t.Fatal(err)
	}
	// PING is answered with PONG echoing the context, and never reaches
	// the application.
	_ = p2.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, cmd, err = p2.r.Next(nil)
	if err != nil || cmd.Name != zmtp.CmdPong || string(cmd.Body) != "ctx" {
		t.Fatalf("raw peer read %q %q, %v; want PONG ctx", cmd.Name, cmd.Body, err)
	}
	eq(t, mustRecv(t, tctx(t), pull2), "after-ping")
	ev = waitEv(t, pull2, EventDisconnected)
	if !errors.Is(ev.Err, errHeartbeat) {
		t.Fatalf("disconnect reason %v, want heartbeat timeout", ev.Err)
	}

	// Two of our sockets with heartbeats stay connected while idle.
	// (Generous timeouts: a loaded CI machine must not look like a dead
	// peer.)
	a := mk(t, Pair, Config{HeartbeatInterval: 20 * time.Millisecond, HeartbeatTimeout: 300 * time.Millisecond, HeartbeatTTL: time.Second})
	b := mk(t, Pair, Config{HeartbeatInterval: 20 * time.Millisecond, HeartbeatTimeout: 300 * time.Millisecond})
	connect(t, b, bind(t, a, "tcp://127.0.0.1:0"))
	waitPeers(t, a, 1)
	ctx := tctx(t)
	for i := range 2 {
		// Idle for a while (longer than interval + timeout), waiting on
		// Recv.
		if _, err := a.Recv(withTimeout(ctx, 500)); !isTimeout(err) {
			t.Fatalf("Recv on idle PAIR: %v", err)
		}
		mustSend(t, ctx, b, fmt.Sprint(i))
		eq(t, mustRecv(t, ctx, a), fmt.Sprint(i))
	}
	if st := a.Stats(); st.Disconnects != 0 {
		t.Fatalf("idle heartbeating peers disconnected: %+v", st)
	}
}

func TestLingerFlush(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		pull := mk(t, Pull, Config{})
		push, err := New(Push, Config{Linger: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		connect(t, push, bind(t, pull, ep()))
		const n = 500
		for i := range n {
			mustSend(t, ctx, push, fmt.Sprint(i), strings.Repeat("z", 1000))
		}
		if err := push.Close(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			eq(t, mustRecv(t, ctx, pull)[:1], fmt.Sprint(i))
		}
	})
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
			waitFor(t, "handshake failure", func() bool { return pull.Stats().HandshakeFailures > before })
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
	waitFor(t, "too-large disconnect", func() bool { return pull.Stats().TooLarge == 1 })
	mustSend(t, ctx, push, "still")
	eq(t, mustRecv(t, ctx, pull), "still")

	// A flood of empty frames in one message is bounded too.
	p = rawConnect(t, addr, "PUSH")
	waitPeers(t, pull, 2)
	p.write(t, bytes.Repeat([]byte{zmtp.FlagMore, 0}, 40000))
	waitFor(t, "frame-flood disconnect", func() bool { return pull.Stats().TooLarge == 2 })

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

func TestIPCStaleFile(t *testing.T) {
	dir, err := os.MkdirTemp("", "fmq")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // leaves the socket file behind
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	s := mk(t, Pull, Config{})
	bind(t, s, "ipc://"+path)
	if err := s.Unbind("ipc://" + path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("socket file left after Unbind: %v", err)
	}
	bind(t, s, "ipc://"+path)
	// Now someone listens: a second bind must fail, not steal the path.
	s2 := mk(t, Pull, Config{})
	if _, err := s2.Bind("ipc://" + path); err == nil {
		t.Fatal("bind over a live ipc socket succeeded")
	}
	// A regular file is never removed.
	plain := filepath.Join(dir, "file")
	if err := os.WriteFile(plain, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Bind("ipc://" + plain); err == nil {
		t.Fatal("bind over a regular file succeeded")
	}
	if b, _ := os.ReadFile(plain); string(b) != "data" {
		t.Fatal("regular file clobbered")
	}
}

func TestCloseAndEndpoints(t *testing.T) {
	ctx := tctx(t)
	s, err := New(Pull, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{"foo", "tcp://", "tcp://127.0.0.1", "udp://1.2.3.4:5", "tcp://*:5555", "tcp://127.0.0.1:0"} {
		if err := s.Connect(ep); !errors.Is(err, ErrBadEndpoint) {
			t.Errorf("Connect(%q): %v", ep, err)
		}
	}
	// Wildcard host: the resolved endpoint names the port, and a loopback
	// connection reaches it.
	wild := bind(t, s, "tcp://*:0")
	port := wild[strings.LastIndex(wild, ":")+1:]
	if !strings.HasPrefix(wild, "tcp://0.0.0.0:") || port == "0" {
		t.Fatalf("resolved %q", wild)
	}
	push := mk(t, Push, Config{})
	connect(t, push, "tcp://127.0.0.1:"+port)
	mustSend(t, ctx, push, "wild")
	eq(t, mustRecv(t, ctx, s), "wild")
	if err := s.Unbind("tcp://*:0"); err != nil {
		t.Fatal(err)
	}
	addr := bind(t, s, "tcp://127.0.0.1:0")
	if err := s.Unbind(addr); err != nil {
		t.Fatal(err)
	}
	if err := s.Unbind(addr); !errors.Is(err, ErrBadEndpoint) {
		t.Fatalf("second Unbind: %v", err)
	}
	connect(t, s, "tcp://127.0.0.1:1")
	if err := s.Disconnect("tcp://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := s.Recv(ctx)
		errc <- err
	}()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("blocked Recv: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(ctx); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if _, err := s.Bind("tcp://127.0.0.1:0"); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if err := s.Connect("tcp://127.0.0.1:1"); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	for range s.Events() {
	}
	if _, err := s.Recv(ctx); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
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

func TestConcurrentSendAndCloseUnderLoad(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		pull := mk(t, Pull, Config{RecvHWM: 10})
		addr := bind(t, pull, ep())
		push := mk(t, Push, Config{SendHWM: 10, Linger: -1})
		connect(t, push, addr)
		push2 := mk(t, Push, Config{SendHWM: 10})
		connect(t, push2, addr)
		const senders, each = 4, 200
		errc := make(chan error, 2*senders)
		for i := range senders {
			for _, s := range []*Socket{push, push2} {
				go func() {
					for j := range each {
						if err := s.Send(ctx, NewMsgString(fmt.Sprint(i), fmt.Sprint(j))); err != nil {
							errc <- err
							return
						}
					}
					errc <- nil
				}()
			}
		}
		// Receive some, then close everything while senders are busy.
		for range senders * each / 2 {
			mustRecv(t, ctx, pull)
		}
		pull.Close()
		push.Close()
		push2.Close()
		for range 2 * senders {
			if err := <-errc; err != nil && !errors.Is(err, ErrClosed) {
				t.Fatalf("sender: %v", err)
			}
		}
	})
}

// TestSoakChurn runs traffic while receivers come and go. It is long, so
// it runs only with FASTMQ_LONG=1.
func TestSoakChurn(t *testing.T) {
	if os.Getenv("FASTMQ_LONG") == "" {
		t.Skip("set FASTMQ_LONG=1 to run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	push := mk(t, Push, Config{ReconnectInterval: time.Millisecond, ReconnectIntervalMax: 10 * time.Millisecond, HeartbeatInterval: 10 * time.Millisecond})
	var addrs []string
	var pulls []*Socket
	for range 3 {
		p := mk(t, Pull, Config{HeartbeatInterval: 10 * time.Millisecond})
		addrs = append(addrs, bind(t, p, "tcp://127.0.0.1:0"))
		pulls = append(pulls, p)
		connect(t, push, addrs[len(addrs)-1])
	}
	var received atomic.Int64
	recv := func(p *Socket) {
		for {
			if _, err := p.Recv(ctx); err != nil {
				return
			}
			received.Add(1)
		}
	}
	for _, p := range pulls {
		go recv(p)
	}
	for round := 0; ctx.Err() == nil && round < 1<<30; round++ {
		if err := push.Send(ctx, NewMsgString("m")); err != nil {
			if ctx.Err() == nil {
				t.Fatal(err)
			}
			break
		}
		if round%5000 == 4999 {
			i := (round / 5000) % len(pulls)
			pulls[i].Close()
			p := mk(t, Pull, Config{HeartbeatInterval: 10 * time.Millisecond})
			bind(t, p, addrs[i])
			pulls[i] = p
			go recv(p)
		}
	}
	if received.Load() == 0 {
		t.Fatal("nothing received")
	}
	t.Logf("received %d", received.Load())
}

func TestCloseWithStuckPeer(t *testing.T) {
	// A peer that completes the handshake and never reads: once kernel
	// buffers fill, our writer blocks in write. Close must still return
	// after the linger time.
	ctx := tctx(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done, stop := make(chan struct{}), make(chan struct{})
	defer func() { close(stop); <-done }()
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r, w := zmtp.NewReader(c, 0), zmtp.NewWriter(c, 0)
		if _, err := zmtp.Handshake(r, w, zmtp.Config{SocketType: "PULL"}); err != nil {
			return
		}
		<-stop // never read again
	}()
	push, err := New(Push, Config{SendHWM: 1, Linger: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	connect(t, push, "tcp://"+l.Addr().String())
	waitPeers(t, push, 1)
	big := make([]byte, 1<<20)
	for i := 0; i < 1000; i++ {
		c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := push.Send(c, NewMsg(big))
		cancel()
		if err != nil {
			break
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- push.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("Close hung on a peer that does not read")
	}
}

func TestHeartbeatLiveness(t *testing.T) {
	ctx := tctx(t)
	pull := mk(t, Pull, Config{HeartbeatInterval: 10 * time.Millisecond, HeartbeatTimeout: 200 * time.Millisecond})
	addr := bind(t, pull, "tcp://127.0.0.1:0")

	// A ZMTP 3.0 peer knows no PING: it is neither pinged nor timed out.
	old := rawDial(t, addr)
	_ = old.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := zmtp.Handshake(old.r, old.w, zmtp.Config{SocketType: "PUSH", ZMTP30: true}); err != nil {
		t.Fatal(err)
	}
	_ = old.c.SetDeadline(time.Time{})

	// A 3.1 peer that never answers PINGs but keeps sending data stays:
	// any traffic counts.
	busy := rawConnect(t, addr, "PUSH")
	waitPeers(t, pull, 2)
	for i := range 30 {
		if err := busy.w.WriteMessage([][]byte{[]byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
		if err := busy.w.Flush(); err != nil {
			t.Fatal(err)
		}
		// Paced: 30 messages over about three heartbeat timeouts.
		eq(t, mustRecv(t, ctx, pull), fmt.Sprint(i))
		if _, err := pull.Recv(withTimeout(ctx, 20)); !isTimeout(err) {
			t.Fatalf("unexpected: %v", err)
		}
	}
	if st := pull.Stats(); st.Disconnects != 0 || st.Peers != 2 {
		t.Fatalf("stats %+v", st)
	}
	// The 3.0 peer got no PING: nothing is readable.
	_ = old.c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, _, err := old.r.Next(nil); err == nil {
		t.Fatal("ZMTP 3.0 peer received traffic")
	}
}

func TestConnectBeforeBind(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		addr := ep()
		if strings.HasPrefix(addr, "tcp://") {
			// Reserve a port, then free it so that nothing listens there.
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr = "tcp://" + l.Addr().String()
			l.Close()
		}
		push := mk(t, Push, Config{ReconnectInterval: 5 * time.Millisecond, ReconnectIntervalMax: 20 * time.Millisecond})
		connect(t, push, addr)
		waitEv(t, push, EventConnectRetried)
		waitEv(t, push, EventConnectRetried)
		if push.Stats().ConnectRetries < 2 {
			t.Fatalf("stats %+v", push.Stats())
		}
		pull := mk(t, Pull, Config{})
		bind(t, pull, addr)
		waitEv(t, push, EventConnected)
		mustSend(t, ctx, push, "late")
		eq(t, mustRecv(t, ctx, pull), "late")
	})
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
		waitFor(t, "queue full", func() bool { return pull.queued() == hwm })
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

// TestPeerTTLCannotLiftOurTimeout: a peer that announces a huge TTL in a
// PING and then goes silent is still dropped by our own heartbeat timeout.
func TestPeerTTLCannotLiftOurTimeout(t *testing.T) {
	pull := mk(t, Pull, Config{HeartbeatInterval: 20 * time.Millisecond, HeartbeatTimeout: 60 * time.Millisecond})
	addr := bind(t, pull, "tcp://127.0.0.1:0")
	p := rawConnect(t, addr, "PUSH")
	waitEv(t, pull, EventAccepted)
	if err := p.w.WriteCommand(zmtp.CmdPing, zmtp.AppendPing(nil, 65535, nil)); err != nil {
		t.Fatal(err)
	}
	if err := p.w.Flush(); err != nil {
		t.Fatal(err)
	}
	ev := waitEv(t, pull, EventDisconnected)
	if !errors.Is(ev.Err, errHeartbeat) {
		t.Fatalf("disconnect reason %v, want heartbeat timeout", ev.Err)
	}
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
// their handshake are capped; past the cap new ones are closed at once,
// and once the silent ones go, peers connect again.
func TestPendingHandshakesBounded(t *testing.T) {
	pull := mk(t, Pull, Config{HandshakeTimeout: time.Minute})
	addr := bind(t, pull, "tcp://127.0.0.1:0")
	var silent []net.Conn
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	refused := false
	for i := 0; i < maxPendingHandshakes+64 && !refused; i++ {
		c, err := net.Dial("tcp", strings.TrimPrefix(addr, "tcp://"))
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
		select {
		case ev := <-pull.Events():
			if ev.Type == EventHandshakeFailed && errors.Is(ev.Err, errTooManyHandshakes) {
				refused = true
			}
		default:
		}
	}
	if !refused {
		ev := waitEv(t, pull, EventHandshakeFailed)
		if !errors.Is(ev.Err, errTooManyHandshakes) {
			t.Fatalf("handshake failed with %v, want errTooManyHandshakes", ev.Err)
		}
	}
	for _, c := range silent {
		c.Close()
	}
	silent = nil
	// The silent ones fail their handshakes as they close; then a real
	// peer gets through.
	ctx := tctx(t)
	push := mk(t, Push, Config{})
	connect(t, push, addr)
	mustSend(t, ctx, push, "through")
	eq(t, mustRecv(t, ctx, pull), "through")
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
	waitFor(t, "events dropped", func() bool { return pull.Stats().EventsDropped > 0 })
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
