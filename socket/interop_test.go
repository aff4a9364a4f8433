package socket_test

// Interop suite: our sockets against libzmq through pyzmq. Each python peer
// is testdata/interop/peer.py, bounded by its own alarm. The suite skips
// when pyzmq is missing, unless the CI environment variable is set. The
// harness driving the python peers is in interop_peer_test.go.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/zmtp"
	"github.com/fastmq/fastmq/socket"
)

const interopCount = 5

type interopCase struct {
	name   string
	kind   socket.Kind
	cfg    socket.Config
	sub    []string // our SUB's subscriptions
	role   string   // peer.py role and extra arguments
	args   []string
	run    func(t *testing.T, ctx context.Context, s *socket.Socket, p *pyPeer)
	pyWant []string // what the python peer must print (nil: not checked)
}

var interopCases = []interopCase{
	{
		name: "PUSH-to-libzmq-PULL", kind: socket.Push, role: "pull",
		run: func(t *testing.T, ctx context.Context, s *socket.Socket, _ *pyPeer) {
			for i := range interopCount {
				send(t, ctx, s, fmt.Sprintf("go-%d", i))
			}
		},
		pyWant: seq("go-%d", interopCount),
	},
	{
		name: "libzmq-PUSH-to-PULL", kind: socket.Pull, role: "push",
		run: func(t *testing.T, ctx context.Context, s *socket.Socket, _ *pyPeer) {
			for i := range interopCount {
				wantFrames(t, recvStrings(t, ctx, s), fmt.Sprintf("msg-%d", i))
			}
		},
		pyWant: []string{},
	},
	{
		name: "PUB-to-libzmq-SUB-prefix", kind: socket.Pub, role: "sub", args: []string{"--subscribe", "A"},
		run: func(t *testing.T, ctx context.Context, s *socket.Socket, p *pyPeer) {
			// The subscription reaches us some time after the connection:
			// publish at a modest pace until the subscriber has enough.
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for i := 0; p.running(); i++ {
				send(t, ctx, s, fmt.Sprintf("A-%d", i))
				send(t, ctx, s, fmt.Sprintf("B-%d", i))
				select {
				case <-tick.C:
				case <-p.exited:
				case <-ctx.Done():
					t.Fatal("libzmq SUB did not receive its messages in time")
				}
			}
			lines := p.wait()
			if len(lines) != interopCount {
				t.Fatalf("libzmq SUB printed %q, want %d lines", lines, interopCount)
			}
			last := -1
			for _, l := range lines {
				var n int
				if _, err := fmt.Sscanf(l, "A-%d", &n); err != nil || n <= last {
					t.Fatalf("libzmq SUB got %q: want only A-<n>, increasing (all: %q)", l, lines)
				}
				last = n
			}
		},
	},
	{
		name: "libzmq-XPUB-to-SUB-prefix", kind: socket.Sub, sub: []string{"B"}, role: "pub",
		run: func(t *testing.T, ctx context.Context, s *socket.Socket, _ *pyPeer) {
			for i := range interopCount {
				wantFrames(t, recvStrings(t, ctx, s), fmt.Sprintf("B-%d", i))
			}
		},
		pyWant: []string{"SUBSCRIBED B"},
	},
	{
		name: "REQ-to-libzmq-REP", kind: socket.Req, role: "rep",
		run: func(t *testing.T, ctx context.Context, s *socket.Socket, _ *pyPeer) {
			for i := range interopCount {
				send(t, ctx, s, fmt.Sprintf("go-req-%d", i), "second frame")
				wantFrames(t, recvStrings(t, ctx, s), fmt.Sprintf("go-req-%d", i), "second frame")
			}
		},
		pyWant: seq("go-req-%d\tsecond frame", interopCount),
	},
	{
		name: "libzmq-REQ-to-REP", kind: socket.Rep, role: "req",
		run:    echoWithPrefix(1),
		pyWant: seq("re:req-%d", interopCount),
	},
	{
		name: "DEALER-to-libzmq-ROUTER", kind: socket.Dealer, cfg: socket.Config{Identity: []byte("go-dealer")}, role: "router",
		run: func(t *testing.T, ctx context.Context, s *socket.Socket, _ *pyPeer) {
			for i := range interopCount {
				send(t, ctx, s, fmt.Sprintf("dealer-%d", i))
			}
			for i := range interopCount {
				wantFrames(t, recvStrings(t, ctx, s), fmt.Sprintf("dealer-%d", i))
			}
		},
		pyWant: seq("go-dealer\tdealer-%d", interopCount),
	},
	{
		name: "libzmq-DEALER-to-ROUTER", kind: socket.Router, role: "dealer", args: []string{"--identity", "py-dealer"},
		run: func(t *testing.T, ctx context.Context, s *socket.Socket, _ *pyPeer) {
			for i := range interopCount {
				got := recvStrings(t, ctx, s)
				wantFrames(t, got, "py-dealer", fmt.Sprintf("dealer-%d", i))
				send(t, ctx, s, got[0], "re:"+got[1])
			}
		},
		pyWant: seq("re:dealer-%d", interopCount),
	},
	{
		name: "REQ-to-libzmq-ROUTER", kind: socket.Req, cfg: socket.Config{Identity: []byte("go-req")}, role: "router",
		run: func(t *testing.T, ctx context.Context, s *socket.Socket, _ *pyPeer) {
			for i := range interopCount {
				send(t, ctx, s, fmt.Sprintf("req-%d", i))
				wantFrames(t, recvStrings(t, ctx, s), fmt.Sprintf("req-%d", i))
			}
		},
		pyWant: seq("go-req\t\treq-%d", interopCount),
	},
	{
		name: "libzmq-REQ-to-ROUTER", kind: socket.Router, role: "req", args: []string{"--identity", "py-req"},
		run: func(t *testing.T, ctx context.Context, s *socket.Socket, _ *pyPeer) {
			for i := range interopCount {
				got := recvStrings(t, ctx, s)
				wantFrames(t, got, "py-req", "", fmt.Sprintf("req-%d", i))
				send(t, ctx, s, got[0], "", "re:"+got[2])
			}
		},
		pyWant: seq("re:req-%d", interopCount),
	},
	{
		name: "DEALER-to-libzmq-REP", kind: socket.Dealer, role: "rep",
		run: func(t *testing.T, ctx context.Context, s *socket.Socket, _ *pyPeer) {
			for i := range interopCount {
				send(t, ctx, s, "", fmt.Sprintf("dealer-%d", i))
			}
			for i := range interopCount {
				wantFrames(t, recvStrings(t, ctx, s), "", fmt.Sprintf("dealer-%d", i))
			}
		},
		pyWant: seq("dealer-%d", interopCount),
	},
	{
		name: "libzmq-DEALER-to-REP", kind: socket.Rep, role: "dealer", args: []string{"--envelope"},
		run:    echoWithPrefix(1),
		pyWant: seq("\tre:dealer-%d", interopCount),
	},
	{
		name: "PAIR-to-libzmq-PAIR", kind: socket.Pair, role: "pair", args: []string{"--echo"},
		run: func(t *testing.T, ctx context.Context, s *socket.Socket, _ *pyPeer) {
			for i := range interopCount {
				send(t, ctx, s, fmt.Sprintf("go-pair-%d", i))
				wantFrames(t, recvStrings(t, ctx, s), fmt.Sprintf("go-pair-%d", i))
			}
		},
		pyWant: seq("go-pair-%d", interopCount),
	},
	{
		name: "libzmq-PAIR-to-PAIR", kind: socket.Pair, role: "pair",
		run:    echoWithPrefix(1),
		pyWant: seq("re:pair-%d", interopCount),
	},
}

// frameSizes cover the short (1-byte length) and long (8-byte length)
// frame encodings and their boundary.
var frameSizes = []int{0, 1, 255, 256, 70000, 1 << 20}

func sizedFrame(size int) []byte { return bytes.Repeat([]byte{byte(size % 251)}, size) }

func lensLine(frames ...[]byte) string {
	parts := make([]string, len(frames))
	for i, f := range frames {
		first := -1
		if len(f) > 0 {
			first = int(f[0])
		}
		parts[i] = fmt.Sprintf("len=%d byte=%d", len(f), first)
	}
	return strings.Join(parts, "\t")
}

// TestInteropFrameSizes sends short and long frames both ways, single and
// multipart.
func TestInteropFrameSizes(t *testing.T) {
	needPyzmq(t)
	t.Run("to-libzmq", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s := newSock(t, socket.Push, socket.Config{})
		p := link(t, s, "tcp", true, "pull", "--count", fmt.Sprint(len(frameSizes)+1), "--lens")
		var want []string
		for _, n := range frameSizes {
			if err := s.Send(ctx, socket.NewMsg(sizedFrame(n))); err != nil {
				t.Fatal(err)
			}
			want = append(want, lensLine(sizedFrame(n)))
		}
		multi := [][]byte{sizedFrame(300), sizedFrame(0), sizedFrame(70000)}
		if err := s.Send(ctx, socket.NewMsg(multi...)); err != nil {
			t.Fatal(err)
		}
		want = append(want, lensLine(multi...))
		wantLines(t, p.wait(), want)
	})
	t.Run("from-libzmq", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s := newSock(t, socket.Pull, socket.Config{})
		var sizes []string
		for _, n := range frameSizes {
			sizes = append(sizes, fmt.Sprint(n))
		}
		p := link(t, s, "ipc", false, "push", "--sizes", strings.Join(sizes, ","))
		for _, n := range frameSizes {
			m, err := s.Recv(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Frames) != 1 || !bytes.Equal(m.Frames[0], sizedFrame(n)) {
				t.Fatalf("got %s, want %s", lensLine(m.Frames...), lensLine(sizedFrame(n)))
			}
		}
		p.wait()
	})
}

// TestInteropMaxMsgSize sends a libzmq message over our MaxMsgSize: the
// peer is cut off and the message never delivered.
func TestInteropMaxMsgSize(t *testing.T) {
	needPyzmq(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := newSock(t, socket.Pull, socket.Config{MaxMsgSize: 64 << 10})
	p := link(t, s, "tcp", true, "push", "--sizes", fmt.Sprint(1<<20))
	ev := waitEvent(t, ctx, s, socket.EventDisconnected)
	if !errors.Is(ev.Err, socket.ErrMsgTooLarge) {
		t.Errorf("disconnect event %v, want ErrMsgTooLarge", ev)
	}
	p.wait()
	if st := s.Stats(); st.TooLarge == 0 || st.Received != 0 {
		t.Fatalf("stats after an oversized message: %+v", st)
	}
}

// TestInteropReqCorrelate runs our REQ with request ids and relaxed mode
// against libzmq's REP, which must echo the id frame back untouched.
func TestInteropReqCorrelate(t *testing.T) {
	needPyzmq(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := newSock(t, socket.Req, socket.Config{ReqCorrelate: true, ReqRelaxed: true})
	p := link(t, s, "tcp", false, "rep", "--count", "3")
	for i := range 3 {
		send(t, ctx, s, fmt.Sprintf("corr-%d", i))
		wantFrames(t, recvStrings(t, ctx, s), fmt.Sprintf("corr-%d", i))
	}
	wantLines(t, p.wait(), seq("corr-%d", 3))
}

// echoWithPrefix receives interopCount messages of want frames and sends
// each back with "re:" before its last frame.
func echoWithPrefix(want int) func(t *testing.T, ctx context.Context, s *socket.Socket, _ *pyPeer) {
	return func(t *testing.T, ctx context.Context, s *socket.Socket, _ *pyPeer) {
		for range interopCount {
			got := recvStrings(t, ctx, s)
			if len(got) != want {
				t.Fatalf("got frames %q, want %d frame(s)", got, want)
			}
			got[len(got)-1] = "re:" + got[len(got)-1]
			send(t, ctx, s, got...)
		}
	}
}

// TestInteropPatterns runs every pattern against libzmq, over tcp and ipc,
// with our socket binding and with libzmq binding.
func TestInteropPatterns(t *testing.T) {
	needPyzmq(t)
	for _, tc := range interopCases {
		for _, transport := range []string{"tcp", "ipc"} {
			for _, weBind := range []bool{true, false} {
				side := "we-bind"
				if !weBind {
					side = "libzmq-binds"
				}
				t.Run(tc.name+"/"+transport+"/"+side, func(t *testing.T) {
					t.Parallel()
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					s := newSock(t, tc.kind, tc.cfg)
					for _, prefix := range tc.sub {
						if err := s.Subscribe([]byte(prefix)); err != nil {
							t.Fatal(err)
						}
					}
					args := append([]string{"--count", fmt.Sprint(interopCount)}, tc.args...)
					p := link(t, s, transport, weBind, tc.role, args...)
					tc.run(t, ctx, s, p)
					if tc.pyWant != nil {
						wantLines(t, p.wait(), tc.pyWant)
					}
				})
			}
		}
	}
}

// waitEvent reads s.Events until one of type typ arrives.
func waitEvent(t *testing.T, ctx context.Context, s *socket.Socket, typ socket.EventType) socket.Event {
	t.Helper()
	var seen []string
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				t.Fatalf("events closed before %v; saw %q", typ, seen)
			}
			if ev.Type == typ {
				return ev
			}
			seen = append(seen, ev.String())
		case <-ctx.Done():
			t.Fatalf("no %v event; saw %q", typ, seen)
		}
	}
}

func plainServer() socket.Config {
	return socket.Config{PlainAuth: func(u, p string) bool { return u == "admin" && p == "secret" }}
}

// TestInteropPlain checks PLAIN both ways: our server with libzmq clients
// and our client with a libzmq server (ZAP handler in pyzmq).
func TestInteropPlain(t *testing.T) {
	needPyzmq(t)
	t.Run("our-server-accepts-libzmq-client", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s := newSock(t, socket.Rep, plainServer())
		p := link(t, s, "tcp", true, "req", "--count", "3", "--plain-user", "admin", "--plain-pass", "secret")
		for range 3 {
			got := recvStrings(t, ctx, s)
			send(t, ctx, s, "re:"+got[0])
		}
		wantLines(t, p.wait(), seq("re:req-%d", 3))
	})
	t.Run("our-server-rejects-wrong-password", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s := newSock(t, socket.Rep, plainServer())
		p := link(t, s, "tcp", true, "authfail", "--plain-user", "admin", "--plain-pass", "wrong")
		lines := p.wait()
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "AUTH_FAILED") {
			t.Fatalf("libzmq client: got %q, want AUTH_FAILED", lines)
		}
		ev := waitEvent(t, ctx, s, socket.EventHandshakeFailed)
		if !errors.Is(ev.Err, zmtp.ErrAuth) {
			t.Errorf("handshake-failed event: %v, want an authentication failure", ev)
		}
		st := s.Stats()
		if st.Received != 0 || st.HandshakeFailures == 0 {
			t.Fatalf("stats after rejected client: %+v", st)
		}
	})
	t.Run("our-client-right-credentials", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s := newSock(t, socket.Req, socket.Config{PlainUsername: "admin", PlainPassword: "secret"})
		p := link(t, s, "tcp", false, "rep", "--count", "3", "--plain-server", "admin:secret")
		for i := range 3 {
			send(t, ctx, s, fmt.Sprintf("plain-%d", i))
			wantFrames(t, recvStrings(t, ctx, s), fmt.Sprintf("plain-%d", i))
		}
		wantLines(t, p.wait(), seq("plain-%d", 3))
	})
	t.Run("our-client-wrong-credentials", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s := newSock(t, socket.Req, socket.Config{PlainUsername: "admin", PlainPassword: "wrong"})
		p := link(t, s, "tcp", false, "rep", "--count", "1", "--plain-server", "admin:secret")
		// libzmq's ZAP handler refuses the password: the server sends an
		// ERROR command, which must be what failed the handshake.
		ev := waitEvent(t, ctx, s, socket.EventHandshakeFailed)
		if !errors.Is(ev.Err, zmtp.ErrPeerError) {
			t.Errorf("handshake-failed event: %v, want the server's ERROR", ev)
		}
		if st := s.Stats(); st.Peers != 0 {
			t.Fatalf("stats after rejected handshake: %+v", st)
		}
		p.kill()
	})
}

// TestInteropHeartbeats runs idle connections with heartbeats on: libzmq's
// (PINGs we must answer, TTL we receive) and ours (PINGs libzmq answers and
// must not see as messages). The links must stay up through idle gaps
// longer than the heartbeat timeouts.
func TestInteropHeartbeats(t *testing.T) {
	needPyzmq(t)
	const n = 3
	gap := 400 * time.Millisecond
	for _, weBind := range []bool{true, false} {
		side := "we-bind"
		if !weBind {
			side = "libzmq-binds"
		}
		t.Run("libzmq-heartbeats/"+side, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s := newSock(t, socket.Rep, socket.Config{})
			p := link(t, s, "tcp", weBind, "req", "--count", fmt.Sprint(n),
				"--heartbeat-ivl", "50", "--heartbeat-timeout", "150", "--heartbeat-ttl", "1000",
				"--gap-ms", fmt.Sprint(gap.Milliseconds()), "--monitor", "--hold")
			echoN(t, ctx, s, n)
			wantLines(t, p.untilDone(), append(seq("re:req-%d", n), "DISCONNECTS 0"))
			if st := s.Stats(); st.Disconnects != 0 || st.Peers != 1 {
				t.Fatalf("our side saw disconnects: %+v", st)
			}
			p.release()
		})
		t.Run("our-heartbeats/"+side, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s := newSock(t, socket.Push, socket.Config{
				HeartbeatInterval: 50 * time.Millisecond,
				HeartbeatTimeout:  150 * time.Millisecond,
				HeartbeatTTL:      time.Second,
			})
			p := link(t, s, "tcp", weBind, "pull", "--count", fmt.Sprint(n),
				"--quiet-ms", "300", "--monitor", "--hold")
			for i := range n {
				if i > 0 {
					idle(ctx, gap) // let heartbeats run on an idle link
				}
				send(t, ctx, s, fmt.Sprintf("hb-%d", i))
			}
			wantLines(t, p.untilDone(), append(seq("hb-%d", n), "DISCONNECTS 0"))
			if st := s.Stats(); st.Disconnects != 0 || st.Peers != 1 {
				t.Fatalf("our side saw disconnects: %+v", st)
			}
			p.release()
		})
	}
}

// idle keeps a link idle for d: this is the scenario under test (traffic
// gaps longer than the heartbeat timeout), not synchronisation.
func idle(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

func echoN(t *testing.T, ctx context.Context, s *socket.Socket, n int) {
	t.Helper()
	for range n {
		got := recvStrings(t, ctx, s)
		got[len(got)-1] = "re:" + got[len(got)-1]
		send(t, ctx, s, got...)
	}
}
