package socket

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/zmtp"
)

func mustKeys(t testing.TB) (pub, sec CurveKey) {
	t.Helper()
	pub, sec, err := NewCurveKeypair()
	if err != nil {
		t.Fatal(err)
	}
	return pub, sec
}

func TestCurveReqRep(t *testing.T) {
	ctx := tctx(t)
	spub, ssec := mustKeys(t)
	cpub, csec := mustKeys(t)
	var seen []AuthRequest
	rep := mk(t, Rep, Config{CurveServer: true, CurveSecretKey: ssec, Authenticator: AllOf(
		AuthFunc(func(r AuthRequest) error { seen = append(seen, r); return nil }),
		AllowCurveKeys(cpub),
	)})
	ep := bind(t, rep, "tcp://127.0.0.1:0")
	req := mk(t, Req, Config{CurveServerKey: spub, CurveSecretKey: csec, CurvePublicKey: cpub})
	connect(t, req, ep)
	for _, m := range []string{"hello", strings.Repeat("x", 100<<10)} {
		mustSend(t, ctx, req, m, "two")
		eq(t, mustRecv(t, ctx, rep), m, "two")
		mustSend(t, ctx, rep, "re:"+m)
		eq(t, mustRecv(t, ctx, req), "re:"+m)
	}
	if len(seen) != 1 || seen[0].Mechanism != "CURVE" || seen[0].ClientKey != cpub || !strings.HasPrefix(seen[0].Address, "127.0.0.1:") {
		t.Fatalf("authenticator saw %+v", seen)
	}
}

func TestCurvePubSubAnyKey(t *testing.T) {
	ctx := tctx(t)
	spub, ssec := mustKeys(t)
	pub := mk(t, Pub, Config{CurveServer: true, CurveAllowAnyClient: true, CurveSecretKey: ssec})
	ep := bind(t, pub, "tcp://127.0.0.1:0")
	sub := mk(t, Sub, Config{CurveServerKey: spub}) // a fresh client key
	if err := sub.Subscribe([]byte("A")); err != nil {
		t.Fatal(err)
	}
	connect(t, sub, ep)
	waitPeers(t, pub, 1)
	for i := 0; ; i++ {
		mustSend(t, ctx, pub, "B-skip")
		mustSend(t, ctx, pub, "A-1")
		m, err := sub.Recv(withTimeout(ctx, 20))
		if err == nil {
			eq(t, []string{string(m.Frames[0])}, "A-1")
			return
		}
		if !isTimeout(err) || i > 400 {
			t.Fatal(err)
		}
	}
}

func TestCurveRefusals(t *testing.T) {
	spub, ssec := mustKeys(t)
	_, other := mustKeys(t)
	cpub, csec := mustKeys(t)
	rep := mk(t, Rep, Config{CurveServer: true, CurveSecretKey: ssec, Authenticator: AllowCurveKeys(cpub)})
	ep := bind(t, rep, "tcp://127.0.0.1:0")

	// The wrong server key: both sides report the handshake failure.
	wrong := mk(t, Req, Config{CurveServerKey: CurvePublicKey(other), CurveSecretKey: csec})
	connect(t, wrong, ep)
	ev := waitEv(t, wrong, EventHandshakeFailed)
	if !errors.Is(ev.Err, zmtp.ErrPeerError) {
		t.Fatalf("client event %v", ev)
	}
	ev = waitEv(t, rep, EventHandshakeFailed)
	if !errors.Is(ev.Err, zmtp.ErrCurve) || !strings.Contains(ev.Err.Error(), "wrong server key") {
		t.Fatalf("server event %v", ev)
	}
	wrong.Close()

	// A key the authenticator does not know.
	_, stranger := mustKeys(t)
	refused := mk(t, Req, Config{CurveServerKey: spub, CurveSecretKey: stranger})
	connect(t, refused, ep)
	ev = waitEv(t, refused, EventHandshakeFailed)
	if !errors.Is(ev.Err, zmtp.ErrPeerError) || !strings.Contains(ev.Err.Error(), "refused our key") {
		t.Fatalf("client event %v", ev)
	}
	ev = waitEv(t, rep, EventHandshakeFailed)
	if !errors.Is(ev.Err, ErrDenied) || !errors.Is(ev.Err, zmtp.ErrAuth) {
		t.Fatalf("server event %v", ev)
	}
	refused.Close()

	// A NULL client of a CURVE server.
	null := mk(t, Req, Config{})
	connect(t, null, ep)
	ev = waitEv(t, null, EventHandshakeFailed)
	if !errors.Is(ev.Err, zmtp.ErrMechanism) {
		t.Fatalf("NULL client event %v", ev)
	}
}

func TestCurveConfigChecks(t *testing.T) {
	spub, ssec := mustKeys(t)
	cpub, _ := mustKeys(t)
	for _, c := range []Config{
		{CurveServer: true},
		{CurveServer: true, CurveSecretKey: ssec, CurveServerKey: spub},
		{CurveServerKey: spub, PlainUsername: "u"},
		{CurveServer: true, CurveSecretKey: ssec, PlainAuth: func(string, string) bool { return true }},
		{CurveSecretKey: ssec},
		{CurveServerKey: spub, CurveSecretKey: ssec, CurvePublicKey: cpub},
	} {
		if _, err := New(Req, c); err == nil {
			t.Errorf("New accepted %+v", c)
		}
	}
}

func TestCurveKeyFiles(t *testing.T) {
	dir := t.TempDir()
	pub, sec := mustKeys(t)
	name := filepath.Join(dir, "server")
	if err := WriteCurveKeypair(name, pub, sec); err != nil {
		t.Fatal(err)
	}
	if err := WriteCurveKeypair(name, pub, sec); err == nil {
		t.Fatal("overwrote a key pair")
	}
	for path, want := range map[string]string{name + ".key": sec.Z85() + "\n", name + ".pub": pub.Z85() + "\n"} {
		b, err := os.ReadFile(path)
		if err != nil || string(b) != want {
			t.Fatalf("%s: %q %v", path, b, err)
		}
	}
	st, _ := os.Stat(name + ".key")
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("secret key mode %v", st.Mode())
	}
	if k, err := LoadCurveSecretKey(name + ".key"); err != nil || k != sec {
		t.Fatal(k, err)
	}
	if k, err := LoadCurvePublicKey(name + ".pub"); err != nil || k != pub {
		t.Fatal(k, err)
	}
	if k, err := LoadCurvePublicKey(pub.Z85()); err != nil || k != pub {
		t.Fatal(k, err)
	}
	if err := os.Chmod(name+".key", 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCurveSecretKey(name + ".key"); !errors.Is(err, ErrKeyFileMode) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable secret key: %v", err)
	}
	if _, err := LoadCurvePublicKey(filepath.Join(dir, "none.pub")); err == nil {
		t.Fatal("missing file loaded")
	}
}

func TestAuthenticators(t *testing.T) {
	dir := t.TempDir()
	pub, sec := mustKeys(t)
	if err := WriteCurveKeypair(filepath.Join(dir, "a"), pub, sec); err != nil {
		t.Fatal(err)
	}
	kd, err := NewCurveKeyDir(dir)
	if err != nil || kd.Keys() != 1 {
		t.Fatal(kd, err)
	}
	curve := AuthRequest{Mechanism: "CURVE", Address: "10.1.2.3:5555", ClientKey: pub}
	if err := kd.Authenticate(curve); err != nil {
		t.Fatal(err)
	}
	other, _ := mustKeys(t)
	if err := kd.Authenticate(AuthRequest{Mechanism: "CURVE", ClientKey: other}); !errors.Is(err, ErrDenied) {
		t.Fatal(err)
	}
	// A key added later is seen (the directory's mtime changes).
	if err := os.WriteFile(filepath.Join(dir, "b.pub"), []byte(other.Z85()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(dir, later, later); err != nil {
		t.Fatal(err)
	}
	if err := kd.Authenticate(AuthRequest{Mechanism: "CURVE", ClientKey: other}); err != nil {
		t.Fatal(err)
	}
	if err := kd.Authenticate(AuthRequest{Mechanism: "NULL"}); !errors.Is(err, ErrDenied) {
		t.Fatal(err)
	}

	pw := filepath.Join(dir, "passwords")
	if err := os.WriteFile(pw, []byte("# users\nadmin=secret\n\nbob=b=c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pp, err := LoadPlainPasswords(pw)
	if err != nil {
		t.Fatal(err)
	}
	if !pp.Check("admin", "secret") || !pp.Check("bob", "b=c") || pp.Check("admin", "x") || pp.Check("eve", "") {
		t.Fatal("password checks")
	}
	if err := pp.Authenticate(AuthRequest{Mechanism: "PLAIN", Username: "admin", Password: "secret"}); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(pw, 0o644)
	if _, err := LoadPlainPasswords(pw); !errors.Is(err, ErrKeyFileMode) {
		t.Fatal(err)
	}

	allow, err := AllowAddresses("10.0.0.0/8", "192.168.1.7")
	if err != nil {
		t.Fatal(err)
	}
	deny, err := DenyAddresses("10.1.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string][2]bool{
		"10.1.2.3:5555":       {true, false},
		"10.2.0.1:1":          {true, true},
		"192.168.1.7:9":       {true, true},
		"192.168.1.8:9":       {false, true},
		"[::ffff:10.2.0.1]:1": {true, true},
		"ipc:///tmp/x":        {false, true},
	} {
		r := AuthRequest{Mechanism: "NULL", Address: addr}
		if got := allow.Authenticate(r) == nil; got != want[0] {
			t.Errorf("allow %s: %v", addr, got)
		}
		if got := deny.Authenticate(r) == nil; got != want[1] {
			t.Errorf("deny %s: %v", addr, got)
		}
	}
	if _, err := AllowAddresses("10.0.0.0/33"); err == nil {
		t.Fatal("bad prefix accepted")
	}
}

func TestRouterPeerCredentials(t *testing.T) {
	ctx := tctx(t)
	spub, ssec := mustKeys(t)
	cpub, csec := mustKeys(t)
	router := mk(t, Router, Config{CurveServer: true, CurveAllowAnyClient: true, CurveSecretKey: ssec})
	ep := bind(t, router, "tcp://127.0.0.1:0")
	dealer := mk(t, Dealer, Config{CurveServerKey: spub, CurveSecretKey: csec, Identity: []byte("d1")})
	connect(t, dealer, ep)
	mustSend(t, ctx, dealer, "fetch")
	got := mustRecv(t, ctx, router)
	cred, ok, err := router.PeerCredentials([]byte(got[0]))
	if err != nil || !ok || cred.Mechanism != "CURVE" || cred.ClientKey != cpub || !strings.HasPrefix(cred.Address, "127.0.0.1:") {
		t.Fatalf("%+v %v %v", cred, ok, err)
	}
	if _, ok, _ := router.PeerCredentials([]byte("nobody")); ok {
		t.Fatal("credentials of an unknown peer")
	}
	if _, _, err := dealer.PeerCredentials([]byte("d1")); !errors.Is(err, ErrNotSupported) {
		t.Fatal(err)
	}
}

// TestCurveServerWithoutAuthenticatorRefuses: a CURVE server with no
// Authenticator refuses every client (libzmq's accept-all default is the
// trap), and CurveAllowAnyClient lets any key in.
func TestCurveServerWithoutAuthenticatorRefuses(t *testing.T) {
	ctx := tctx(t)
	spub, ssec, err := NewCurveKeypair()
	if err != nil {
		t.Fatal(err)
	}
	for _, anyKey := range []bool{false, true} {
		rep := mk(t, Rep, Config{CurveServer: true, CurveSecretKey: ssec, CurveAllowAnyClient: anyKey})
		addr := bind(t, rep, "tcp://127.0.0.1:0")
		req := mk(t, Req, Config{CurveServerKey: spub})
		connect(t, req, addr)
		if !anyKey {
			e := waitEv(t, rep, EventHandshakeFailed)
			if !errors.Is(e.Err, ErrDenied) {
				t.Fatalf("refusal event: %v, want ErrDenied", e.Err)
			}
			continue
		}
		mustSend(t, ctx, req, "ping")
		eq(t, mustRecv(t, ctx, rep), "ping")
	}
}
