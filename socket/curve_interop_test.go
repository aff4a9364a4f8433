package socket_test

// CURVE against libzmq (pyzmq): the interop cases of TestInteropPatterns
// with CURVE on, FastMQ as server and as client, both bind directions,
// tcp and ipc; plus refusals and heartbeats inside MESSAGE. The python
// peers are peer.py with their CURVE options applied by
// testdata/interop/curve/sitecustomize.py.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/zmtp"
	"github.com/fastmq/fastmq/socket"
)

// curveKeys are libzmq's test key pairs (RFC 26's examples).
var curveKeys = struct{ serverPub, serverSec, clientPub, clientSec string }{
	"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7",
	"JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6",
	"Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID",
	"D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs",
}

func key(t *testing.T, z85 string) socket.CurveKey {
	t.Helper()
	k, err := socket.ParseCurveKey(z85)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// useCurvePeers makes the python peers of t and its subtests take the
// CURVE options of sitecustomize.py.
func useCurvePeers(t *testing.T) {
	needPyzmq(t)
	dir, err := filepath.Abs(filepath.Join("testdata", "interop", "curve"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", dir)
}

// curveRoles returns our config with CURVE on and the python peer's
// arguments for the other role.
func curveRoles(t *testing.T, cfg socket.Config, weServe bool) (socket.Config, []string) {
	k := curveKeys
	if weServe {
		cfg.CurveServer = true
		cfg.CurveSecretKey = key(t, k.serverSec)
		cfg.Authenticator = socket.AllowCurveKeys(key(t, k.clientPub))
		return cfg, []string{"--curve-client", k.clientSec, k.clientPub, k.serverPub}
	}
	cfg.CurveServerKey = key(t, k.serverPub)
	cfg.CurveSecretKey = key(t, k.clientSec)
	// No ZAP handler here: a peer that sends and closes at once would
	// have ctx.term() stop the handler while a handshake still needs it
	// (the ZAP cases are in TestInteropCurveRefusals).
	return cfg, []string{"--curve-server", k.serverSec}
}

func TestInteropCurvePatterns(t *testing.T) {
	useCurvePeers(t)
	for _, tc := range interopCases {
		for _, transport := range []string{"tcp", "ipc"} {
			for _, weBind := range []bool{true, false} {
				for _, weServe := range []bool{true, false} {
					side := map[bool]string{true: "we-bind", false: "libzmq-binds"}[weBind]
					role := map[bool]string{true: "we-serve", false: "libzmq-serves"}[weServe]
					t.Run(tc.name+"/"+transport+"/"+side+"/"+role, func(t *testing.T) {
						t.Parallel()
						ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
						defer cancel()
						cfg, pyArgs := curveRoles(t, tc.cfg, weServe)
						s := newSock(t, tc.kind, cfg)
						for _, prefix := range tc.sub {
							if err := s.Subscribe([]byte(prefix)); err != nil {
								t.Fatal(err)
							}
						}
						args := append([]string{"--count", fmt.Sprint(interopCount)}, tc.args...)
						p := link(t, s, transport, weBind, tc.role, append(args, pyArgs...)...)
						tc.run(t, ctx, s, p)
						if tc.pyWant != nil {
							wantLines(t, p.wait(), tc.pyWant)
						}
					})
				}
			}
		}
	}
}

func TestInteropCurveRefusals(t *testing.T) {
	useCurvePeers(t)
	k := curveKeys
	_, otherSec, _ := zmtp.GenerateKeypair(nil)
	otherPub := zmtp.PublicKey(otherSec)
	ours := func(t *testing.T, kind socket.Kind, weServe bool) *socket.Socket {
		cfg, _ := curveRoles(t, socket.Config{}, weServe)
		return newSock(t, kind, cfg)
	}
	authFailed := func(t *testing.T, p *pyPeer) {
		t.Helper()
		lines := p.wait()
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "AUTH_FAILED") {
			t.Fatalf("libzmq client: got %q, want AUTH_FAILED", lines)
		}
	}
	t.Run("libzmq-client-wrong-server-key", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s := ours(t, socket.Rep, true)
		p := link(t, s, "tcp", true, "authfail", "--curve-client", k.clientSec, k.clientPub, otherPub.Z85())
		authFailed(t, p)
		ev := waitEvent(t, ctx, s, socket.EventHandshakeFailed)
		if !errors.Is(ev.Err, zmtp.ErrCurve) || !strings.Contains(ev.Err.Error(), "wrong server key") {
			t.Errorf("handshake-failed event: %v", ev)
		}
	})
	t.Run("libzmq-client-key-not-allowed", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s := ours(t, socket.Rep, true)
		p := link(t, s, "tcp", true, "authfail", "--curve-client", otherSec.Z85(), otherPub.Z85(), k.serverPub)
		authFailed(t, p)
		ev := waitEvent(t, ctx, s, socket.EventHandshakeFailed)
		if !errors.Is(ev.Err, socket.ErrDenied) {
			t.Errorf("handshake-failed event: %v", ev)
		}
		if st := s.Stats(); st.Received != 0 || st.Peers != 0 {
			t.Fatalf("stats after refused client: %+v", st)
		}
	})
	t.Run("our-client-allowed-by-libzmq-zap", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s := ours(t, socket.Req, false)
		p := link(t, s, "tcp", false, "rep", "--count", "2", "--curve-server", k.serverSec, "--zap-allow", k.clientPub)
		for i := range 2 {
			send(t, ctx, s, fmt.Sprintf("zap-%d", i))
			wantFrames(t, recvStrings(t, ctx, s), fmt.Sprintf("zap-%d", i))
		}
		wantLines(t, p.wait(), seq("zap-%d", 2))
	})
	t.Run("our-client-refused-by-libzmq-zap", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s := ours(t, socket.Req, false)
		p := link(t, s, "tcp", false, "rep", "--count", "1", "--curve-server", k.serverSec, "--zap-allow", "-")
		ev := waitEvent(t, ctx, s, socket.EventHandshakeFailed)
		if !errors.Is(ev.Err, zmtp.ErrPeerError) {
			t.Errorf("handshake-failed event: %v, want the server's ERROR", ev)
		}
		p.kill()
	})
	t.Run("our-client-wrong-server-key", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s := newSock(t, socket.Req, socket.Config{CurveServerKey: otherPub, CurveSecretKey: key(t, k.clientSec)})
		p := link(t, s, "tcp", false, "rep", "--count", "1", "--curve-server", k.serverSec)
		ev := waitEvent(t, ctx, s, socket.EventHandshakeFailed)
		if !errors.Is(ev.Err, zmtp.ErrCurve) || !strings.Contains(ev.Err.Error(), "wrong server key") {
			t.Errorf("handshake-failed event: %v", ev)
		}
		p.kill()
	})
}

// TestInteropCurveHeartbeats: libzmq sends its PINGs inside MESSAGE
// commands; we answer them inside MESSAGE too, and the link stays up.
func TestInteropCurveHeartbeats(t *testing.T) {
	useCurvePeers(t)
	const n = 3
	for _, weServe := range []bool{true, false} {
		t.Run(map[bool]string{true: "we-serve", false: "libzmq-serves"}[weServe], func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cfg, pyArgs := curveRoles(t, socket.Config{}, weServe)
			s := newSock(t, socket.Rep, cfg)
			p := link(t, s, "tcp", true, "req", append([]string{"--count", fmt.Sprint(n),
				"--heartbeat-ivl", "50", "--heartbeat-timeout", "150", "--heartbeat-ttl", "1000",
				"--gap-ms", "400", "--monitor", "--hold"}, pyArgs...)...)
			echoN(t, ctx, s, n)
			wantLines(t, p.untilDone(), append(seq("re:req-%d", n), "DISCONNECTS 0"))
			if st := s.Stats(); st.Disconnects != 0 || st.Peers != 1 {
				t.Fatalf("our side saw disconnects: %+v", st)
			}
			p.release()
		})
	}
}
