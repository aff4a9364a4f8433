package zmtp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// libzmq's test key pairs (tests/test_security_curve.cpp, RFC 26).
const (
	libzmqClientPublic = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"
	libzmqClientSecret = "D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs"
	libzmqServerPublic = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
	libzmqServerSecret = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"
)

func TestLibzmqTestKeys(t *testing.T) {
	for _, kp := range [][2]string{{libzmqClientPublic, libzmqClientSecret}, {libzmqServerPublic, libzmqServerSecret}} {
		pub, err := ParseKey(kp[0])
		if err != nil {
			t.Fatal(err)
		}
		sec, err := ParseKey(kp[1])
		if err != nil {
			t.Fatal(err)
		}
		if PublicKey(sec) != pub {
			t.Fatalf("public key of %s is %s, want %s", kp[1], PublicKey(sec).Z85(), kp[0])
		}
		if sec.Z85() != kp[1] {
			t.Fatal("Z85 round trip")
		}
	}
	if _, err := ParseKey(libzmqClientPublic[:39]); !errors.Is(err, ErrKey) {
		t.Fatal(err)
	}
	pub, sec, err := GenerateKeypair(nil)
	if err != nil || PublicKey(sec) != pub || pub.IsZero() {
		t.Fatal("generated key pair", err)
	}
}

func testKeys(t testing.TB) (server, client Key) {
	t.Helper()
	s, err := ParseKey(libzmqServerSecret)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseKey(libzmqClientSecret)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// curvePair runs a CURVE handshake between a client and a server over TCP
// and returns both ends ready for traffic.
func curvePair(t testing.TB, cc, sc Config) (cr *Reader, cw *Writer, sr *Reader, sw *Writer, ci, si PeerInfo) {
	t.Helper()
	a, b := pairTB(t)
	var wg sync.WaitGroup
	var serr error
	sr, sw = NewReader(b, 0), NewWriter(b, 0)
	wg.Add(1)
	go func() {
		defer wg.Done()
		si, serr = Handshake(sr, sw, sc)
	}()
	cr, cw = NewReader(a, 0), NewWriter(a, 0)
	ci, cerr := Handshake(cr, cw, cc)
	wg.Wait()
	if cerr != nil || serr != nil {
		t.Fatalf("handshake: client %v, server %v", cerr, serr)
	}
	return
}

func pairTB(t testing.TB) (net.Conn, net.Conn) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func curveConfigs(t testing.TB) (client, server Config) {
	ss, cs := testKeys(t)
	server = Config{SocketType: "ROUTER", Curve: &CurveConfig{Server: true, SecretKey: ss}}
	client = Config{SocketType: "DEALER", Identity: []byte("me"), Curve: &CurveConfig{SecretKey: cs, ServerKey: PublicKey(ss)}}
	return client, server
}

func TestCurveHandshakeAndTraffic(t *testing.T) {
	cc, sc := curveConfigs(t)
	var seen AuthRequest
	sc.PeerAddress = "peer:1"
	sc.Authorize = func(r AuthRequest) error { seen = r; return nil }
	cr, cw, sr, sw, ci, si := curvePair(t, cc, sc)
	if ci.SocketType != "ROUTER" || si.SocketType != "DEALER" || string(si.Identity) != "me" {
		t.Fatalf("%+v %+v", ci, si)
	}
	if si.ClientKey.Z85() != libzmqClientPublic || seen.ClientKey != si.ClientKey || seen.Mechanism != MechanismCurve || seen.Address != "peer:1" {
		t.Fatalf("server saw %+v", seen)
	}
	big := bytes.Repeat([]byte("x"), 200<<10)
	msgs := [][][]byte{{[]byte("a")}, {{}, []byte("hello"), big}, {bytes.Repeat([]byte("y"), 300)}}
	go func() {
		for _, m := range msgs {
			_ = cw.WriteMessage(m)
		}
		_ = cw.WriteCommand(CmdPing, AppendPing(nil, 7, []byte("ctx")))
		_ = cw.Flush()
	}()
	for _, m := range msgs {
		got, cmd, err := sr.Next(nil)
		if err != nil || cmd.Name != "" || len(got) != len(m) {
			t.Fatalf("got %d frames, %+v, %v", len(got), cmd, err)
		}
		for i := range m {
			if !bytes.Equal(got[i], m[i]) {
				t.Fatalf("frame %d differs", i)
			}
		}
	}
	_, cmd, err := sr.Next(nil)
	if err != nil || cmd.Name != CmdPing {
		t.Fatal(cmd, err)
	}
	// And the other way, with a command written as a raw frame.
	go func() {
		_ = sw.WriteFrame(FlagCommand, append([]byte("\x09SUBSCRIBE"), "topic"...))
		_ = sw.WriteMessage([][]byte{[]byte("back")})
		_ = sw.Flush()
	}()
	_, cmd, err = cr.Next(nil)
	if err != nil || cmd.Name != CmdSubscribe || string(cmd.Body) != "topic" {
		t.Fatal(cmd, err)
	}
	got, _, err := cr.Next(nil)
	if err != nil || string(got[0]) != "back" {
		t.Fatal(got, err)
	}
}

func TestCurveHandshakeFailures(t *testing.T) {
	cc, sc := curveConfigs(t)
	// Wrong server key: the server cannot open HELLO and says so.
	_, other, _ := GenerateKeypair(nil)
	wrong := cc
	wrong.Curve = &CurveConfig{SecretKey: cc.Curve.SecretKey, ServerKey: PublicKey(other)}
	_, ea, _, eb := handshakeBoth(t, wrong, sc)
	if !errors.Is(ea, ErrPeerError) || !errors.Is(eb, ErrCurve) || !strings.Contains(eb.Error(), "HELLO") {
		t.Fatalf("wrong key: client %v, server %v", ea, eb)
	}
	// Refused by the authorizer: an ERROR for the client, ErrAuth for us.
	refuse := sc
	refuse.Authorize = func(r AuthRequest) error { return fmt.Errorf("key %s not allowed", r.ClientKey.Z85()) }
	_, ea, _, eb = handshakeBoth(t, cc, refuse)
	if !errors.Is(ea, ErrPeerError) || !errors.Is(eb, ErrAuth) {
		t.Fatalf("refused: client %v, server %v", ea, eb)
	}
	// CURVE against NULL.
	_, ea, _, eb = handshakeBoth(t, Config{SocketType: "DEALER"}, sc)
	if !errors.Is(ea, ErrMechanism) || !errors.Is(eb, ErrMechanism) {
		t.Fatal(ea, eb)
	}
	// A zero (low-order) server key is refused before anything is sent.
	zero := cc
	zero.Curve = &CurveConfig{SecretKey: cc.Curve.SecretKey}
	_, ea, _, _ = handshakeBoth(t, zero, sc)
	if !errors.Is(ea, ErrKey) {
		t.Fatal(ea)
	}
}

// tap records what a Writer sends and lets a test alter it before it
// reaches the peer's Reader.
type tap struct{ bytes.Buffer }

func curveTapped(t *testing.T) (cw *Writer, out *tap, sr func(io.Reader) *Reader) {
	cc, sc := curveConfigs(t)
	_, cw, srd, _, _, _ := curvePair(t, cc, sc)
	out = &tap{}
	cw.wr = out
	return cw, out, func(src io.Reader) *Reader {
		r := NewReader(src, 0)
		r.curve = srd.curve
		return r
	}
}

func TestCurveTamperReplayAndSecrecy(t *testing.T) {
	cw, out, reader := curveTapped(t)
	secret := []byte("attack at dawn, attack at dawn")
	if err := cw.WriteMessage([][]byte{secret}); err != nil {
		t.Fatal(err)
	}
	_ = cw.Flush()
	first := bytes.Clone(out.Bytes())
	if bytes.Contains(first, secret) || bytes.Contains(first, []byte("attack")) {
		t.Fatal("plaintext on the wire")
	}
	// A flipped byte anywhere in the ciphertext fails.
	for i := 2; i < len(first); i++ {
		bad := bytes.Clone(first)
		bad[i] ^= 1
		r := reader(bytes.NewReader(bad))
		if _, _, err := r.Next(nil); !errors.Is(err, ErrCurve) {
			t.Fatalf("flip at %d: %v", i, err)
		}
	}
	// The genuine frame decrypts once; a replay is refused.
	r := reader(bytes.NewReader(append(bytes.Clone(first), first...)))
	got, _, err := r.Next(nil)
	if err != nil || !bytes.Equal(got[0], secret) {
		t.Fatal(got, err)
	}
	if _, _, err := r.Next(nil); !errors.Is(err, ErrCurve) || !strings.Contains(err.Error(), "replayed") {
		t.Fatal(err)
	}
	// Reordering: the second message before the first.
	out.Reset()
	_ = cw.WriteMessage([][]byte{[]byte("one")})
	_ = cw.Flush()
	one := bytes.Clone(out.Bytes())
	out.Reset()
	_ = cw.WriteMessage([][]byte{[]byte("two")})
	_ = cw.Flush()
	two := bytes.Clone(out.Bytes())
	r = reader(bytes.NewReader(append(two, one...)))
	if got, _, err := r.Next(nil); err != nil || string(got[0]) != "two" {
		t.Fatal(got, err)
	}
	if _, _, err := r.Next(nil); !errors.Is(err, ErrCurve) {
		t.Fatal(err)
	}
}

func TestCurveCompleteDecryptsAhead(t *testing.T) {
	cw, out, reader := curveTapped(t)
	_ = cw.WriteMessage([][]byte{[]byte("a"), []byte("b")})
	_ = cw.WriteCommand(CmdPing, AppendPing(nil, 1, nil))
	_ = cw.Flush()
	wire := bytes.Clone(out.Bytes())
	// Feed byte by byte: Complete is true exactly when a unit is whole.
	f := &byteFeeder{b: wire}
	r := reader(f)
	units := 0
	for units < 2 {
		if !r.Complete() {
			if err := r.fill(r.w - r.r + 1); err != nil {
				t.Fatal(err)
			}
			continue
		}
		frames, cmd, err := r.Next(nil)
		if err != nil {
			t.Fatal(err)
		}
		switch units {
		case 0:
			if len(frames) != 2 || string(frames[1]) != "b" {
				t.Fatal(frames)
			}
		case 1:
			if cmd.Name != CmdPing {
				t.Fatal(cmd)
			}
		}
		units++
	}
}
