package pull_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

func keypair(t testing.TB) (pub, sec socket.CurveKey) {
	t.Helper()
	pub, sec, err := socket.NewCurveKeypair()
	if err != nil {
		t.Fatal(err)
	}
	return pub, sec
}

// TestParseACL: the documented format parses, round-trips through String,
// and every kind of mistake is an error naming its line.
func TestParseACL(t *testing.T) {
	alice, _ := keypair(t)
	good := "# who reads what\n\nfastmq-acl 1\n  # indented comment\nallow " + alice.Z85() + " logs-* audit\nallow user:bob metrics\nallow * public-?\nallow curve:" + alice.Z85() + " [a-c]x\n"
	a, err := pull.ParseACL([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Rules) != 4 || a.Rules[0].Client != alice.Z85() || strings.Join(a.Rules[0].Streams, " ") != "logs-* audit" {
		t.Fatalf("parsed %+v", a)
	}
	b, err := pull.ParseACL([]byte(a.String()))
	if err != nil || b.String() != a.String() {
		t.Fatalf("round trip: %v\n%s\n%s", err, a, b)
	}
	for _, tc := range []struct{ text, want string }{
		{"", "no header"},
		{"allow * x\n", `line 1: want the header "fastmq-acl 1"`},
		{"fastmq-acl 3\n", "line 1: acl format version \"3\"; this program reads versions 1 and 2"},
		{"fastmq-acl 1\nallow list * x\n", `line 2: "list": an operation in a rule needs the header "fastmq-acl 2"`},
		{"fastmq-acl 2\nallow write * x\n", `line 2: client "write" is neither`},
		{"fastmq-acl 1\ndeny * x\n", `line 2: unknown keyword "deny"`},
		{"fastmq-acl 1\nallow *\n", "line 2: \"allow\" needs a client and at least one stream pattern"},
		{"fastmq-acl 1\n\nallow nobody x\n", `line 3: client "nobody" is neither`},
		{"fastmq-acl 1\nallow user: x\n", "line 2: bad PLAIN user"},
		{"fastmq-acl 1\nallow * [x\n", `line 2: stream pattern "[x"`},
	} {
		_, err := pull.ParseACL([]byte(tc.text))
		if !errors.Is(err, pull.ErrBadACL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error with %q", tc.text, err, tc.want)
		}
	}
	dir := t.TempDir()
	if _, err := pull.LoadACL(filepath.Join(dir, "missing.acl")); err == nil || !strings.Contains(err.Error(), "missing.acl") {
		t.Fatalf("a missing file: %v", err)
	}
	f := filepath.Join(dir, "x.acl")
	if err := os.WriteFile(f, []byte("fastmq-acl 1\nallow ? x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := pull.LoadACL(f); err == nil || !strings.Contains(err.Error(), "x.acl") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a bad file: %v", err)
	}
}

// FuzzParseACL: ParseACL never panics, and what it accepts survives a
// round trip through String.
func FuzzParseACL(f *testing.F) {
	for _, s := range []string{
		"fastmq-acl 1\nallow * *\n",
		"fastmq-acl 1\nallow user:bob logs-* [a-z]?\n# c\n",
		"fastmq-acl 1\nallow rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7 audit\n",
		"fastmq-acl 1\nallow curve:Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID x\n",
		"fastmq-acl 2\n",
		"fastmq-acl 2\nlimit members 3 * logs-*\n",
		"allow\n",
		"fastmq-acl 1\nallow * [\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := pull.ParseACL(b)
		if err != nil {
			return
		}
		b2, err := pull.ParseACL([]byte(a.String()))
		if err != nil {
			t.Fatalf("%q parsed, its String %q did not: %v", b, a.String(), err)
		}
		if b2.String() != a.String() {
			t.Fatalf("round trip changed %q into %q", a.String(), b2.String())
		}
	})
}

// curveServer starts a spool server that speaks CURVE to any client key
// and lets the ACL decide who reads what.
func curveServer(t *testing.T, streams map[string]*spool.Log, acl *pull.ACL) (*pull.Server, socket.CurveKey) {
	t.Helper()
	pub, sec := keypair(t)
	s, err := pull.NewServer(pull.ServerConfig{
		Lookup: func(name string) (*spool.Log, bool) { l, ok := streams[name]; return l, ok },
		Socket: socket.Config{CurveServer: true, CurveSecretKey: sec, CurveAllowAnyClient: true},
		ACL:    acl,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, pub
}

// TestForbiddenStopsTheConsumer: a consumer whose CURVE key the ACL does
// not name for a stream gets StatusForbidden, reported through Next and
// Err as ErrForbidden naming the stream (not retried), and counted; a
// consumer the ACL names reads the stream.
func TestForbiddenStopsTheConsumer(t *testing.T) {
	l := openSpool(t, spool.Config{})
	appendN(t, l, "r", 0, 10)
	alice, aliceSec := keypair(t)
	_, eveSec := keypair(t)
	srv, spub := curveServer(t, map[string]*spool.Log{"logs-a": l}, &pull.ACL{Rules: []pull.ACLRule{{Client: alice.Z85(), Streams: []string{"logs-*"}}}})
	pubs := map[string]string{"p": srv.Endpoints()[0]}

	eve := startConsumer(t, pull.ConsumerConfig{Stream: "logs-a", Publishers: pubs, Socket: socket.Config{CurveServerKey: spub, CurveSecretKey: eveSec}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := eve.Next(ctx)
	if !errors.Is(err, pull.ErrForbidden) || eve.Err() != err || !strings.Contains(err.Error(), `"logs-a"`) {
		t.Fatalf("Next: %v, Err: %v; want ErrForbidden naming the stream from both", err, eve.Err())
	}
	if got := srv.Stats().Forbidden; got != 1 {
		t.Fatalf("forbidden counted %d times, want 1 (the consumer must not ask again)", got)
	}

	ok := startConsumer(t, pull.ConsumerConfig{Stream: "logs-a", Publishers: pubs, Socket: socket.Config{CurveServerKey: spub, CurveSecretKey: aliceSec}})
	for i := range 10 {
		if m := next(t, ok); string(m.Value) != fmt.Sprintf("r-%d", i) {
			t.Fatalf("record %d: %q", i, m.Value)
		}
	}
}

// TestForbiddenSaysNothingOfExistence: a client the ACL refuses gets the
// same reply for a stream that exists and one that does not, for every
// op; an older (version 2) request gets StatusBadRequest with the same
// message, which old consumers stop on.
func TestForbiddenSaysNothingOfExistence(t *testing.T) {
	l := openSpool(t, spool.Config{})
	appendN(t, l, "r", 0, 3)
	alice, _ := keypair(t)
	srv, spub := curveServer(t, map[string]*spool.Log{"secret": l}, &pull.ACL{Rules: []pull.ACLRule{{Client: alice.Z85(), Streams: []string{"*"}}}})
	d, err := socket.New(socket.Dealer, socket.Config{CurveServerKey: spub})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Connect(srv.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ask := func(v uint8, op pull.Op, stream string) pull.Reply {
		t.Helper()
		if err := d.Send(ctx, socket.Msg{Frames: pull.EncodeRequest(&pull.Request{Version: v, Op: op, ID: 7, Stream: stream, Epoch: pull.NoEpoch})}); err != nil {
			t.Fatal(err)
		}
		m, err := d.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := pull.DecodeReply(m.Frames)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	for _, op := range []pull.Op{pull.OpFetch, pull.OpMeta, pull.OpSeekTime} {
		have, none := ask(3, op, "secret"), ask(3, op, "nothing")
		if have.Status != pull.StatusForbidden || none.Status != pull.StatusForbidden {
			t.Fatalf("op %d: statuses %v and %v, want forbidden for both", op, have.Status, none.Status)
		}
		if string(have.Data) != pull.ForbiddenMessage("secret") || string(none.Data) != pull.ForbiddenMessage("nothing") {
			t.Fatalf("op %d: messages %q and %q", op, have.Data, none.Data)
		}
		have.Data, none.Data = nil, nil
		if !reflect.DeepEqual(have, none) {
			t.Fatalf("op %d: replies differ beyond the stream name: %+v and %+v", op, have, none)
		}
	}
	old := ask(2, pull.OpFetch, "secret")
	if old.Status != pull.StatusBadRequest || old.Version != 2 || !strings.HasPrefix(string(old.Data), "forbidden: ") {
		t.Fatalf("a version 2 request got %+v", old)
	}
}

// TestConsumerFallsBackOneVersionAtATime: a version 2 publisher answers a
// version 4 or 3 request with StatusBadRequest in version 1 (as servers answer
// versions they do not know); the consumer then speaks version 2 to it,
// not version 1, so log identities and epochs still protect it.
func TestConsumerFallsBackOneVersionAtATime(t *testing.T) {
	r, err := socket.New(socket.Router, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ep, err := r.Bind("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := startConsumer(t, pull.ConsumerConfig{Stream: "s", Publishers: map[string]string{"old": ep}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var versions []uint8
	for len(versions) < 4 {
		m, err := r.Recv(ctx)
		if err != nil {
			t.Fatalf("after versions %v: %v", versions, err)
		}
		req, err := pull.DecodeRequest(m.Frames[1:])
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, req.Version)
		rep := &pull.Reply{Version: req.Version, Status: pull.StatusOK, ID: req.ID}
		if req.Version > 2 {
			rep = &pull.Reply{Version: 1, Status: pull.StatusBadRequest, Data: []byte("protocol version 3, want 1..2")}
		}
		if err := r.Send(ctx, socket.Msg{Frames: append([][]byte{m.Frames[0]}, pull.EncodeReply(rep)...)}); err != nil {
			t.Fatal(err)
		}
	}
	if versions[0] != 4 || versions[1] != 3 || versions[2] != 2 || versions[3] != 2 {
		t.Fatalf("the consumer spoke versions %v, want 4, 3, then 2", versions)
	}
	_ = c
}

// TestACLDeadLetters: a dead-letter stream is readable by exactly the
// clients that may read its parent stream. A grant of "logs.*" without
// "logs" read "logs.g.dlq", the dead letters of "logs", before; over the
// wire too, as an outside client asks.
func TestACLDeadLetters(t *testing.T) {
	alice, _ := keypair(t)
	bob, _ := keypair(t)
	acl := &pull.ACL{Rules: []pull.ACLRule{
		{Client: alice.Z85(), Streams: []string{"logs.*"}},
		{Client: bob.Z85(), Streams: []string{"logs"}},
		{Client: "*", Streams: []string{"public"}},
	}}
	cred := func(k socket.CurveKey) socket.PeerCredentials {
		return socket.PeerCredentials{Mechanism: "CURVE", ClientKey: k}
	}
	for _, tc := range []struct {
		who    socket.CurveKey
		name   string
		stream string
		want   bool
	}{
		{alice, "alice", "logs.eu", true},
		{alice, "alice", "logs", false},
		{alice, "alice", "logs.g.dlq", false},          // the leak
		{alice, "alice", "logs.eu.g.dlq", false},       // or logs' group eu.g
		{alice, "alice", "logs.eu.g.dlq.h.dlq", false}, // dead letters of dead letters
		{bob, "bob", "logs", true},
		{bob, "bob", "logs.g.dlq", true},
		{bob, "bob", "logs.eu", false},
		{bob, "bob", "logs.eu.g.dlq", false},
		{alice, "alice", "public.g.dlq", true},
	} {
		if got := acl.Allows(cred(tc.who), tc.stream); got != tc.want {
			t.Errorf("%s reads %q: %v, want %v", tc.name, tc.stream, got, tc.want)
		}
	}

	l := openSpool(t, spool.Config{})
	appendN(t, l, "r", 0, 3)
	_, alicePriv := keypair(t)
	acl.Rules[0].Client = socket.CurvePublicKey(alicePriv).Z85()
	srv, spub := curveServer(t, map[string]*spool.Log{"logs.g.dlq": l, "logs.eu": l}, acl)
	d, err := socket.New(socket.Dealer, socket.Config{CurveServerKey: spub, CurveSecretKey: alicePriv})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Connect(srv.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for stream, want := range map[string]pull.Status{"logs.g.dlq": pull.StatusForbidden, "logs.eu": pull.StatusOK} {
		if err := d.Send(ctx, socket.Msg{Frames: pull.EncodeRequest(&pull.Request{Version: 3, Op: pull.OpFetch, ID: 9, Stream: stream, MaxBytes: 1 << 20, Epoch: pull.NoEpoch})}); err != nil {
			t.Fatal(err)
		}
		m, err := d.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := pull.DecodeReply(m.Frames)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Status != want {
			t.Fatalf("alice fetches %q: %v, want %v", stream, rep.Status, want)
		}
	}
}

// TestACLOperations: version 2 rules grant read, list or admin; read and
// admin include list; a version 1 file's rules are read grants, which do
// not reach admin; a version 2 file round-trips through String, and one
// of read grants only is written as version 1.
func TestACLOperations(t *testing.T) {
	reader, _ := keypair(t)
	lister, _ := keypair(t)
	admin, _ := keypair(t)
	a, err := pull.ParseACL([]byte(fmt.Sprintf("fastmq-acl 2\nallow read %s orders\nallow list %s *\nallow admin %s orders\nallow user:ops logs\n",
		reader.Z85(), lister.Z85(), admin.Z85())))
	if err != nil {
		t.Fatal(err)
	}
	if a.Rules[3].Op != pull.ACLRead {
		t.Fatalf("a version 2 rule without an operation: %v, want read", a.Rules[3].Op)
	}
	b, err := pull.ParseACL([]byte(a.String()))
	if err != nil || !reflect.DeepEqual(a, b) || !strings.HasPrefix(a.String(), "fastmq-acl 2\nallow read ") {
		t.Fatalf("round trip: %v\n%s\n%s", err, a, b)
	}
	v1, err := pull.ParseACL([]byte("fastmq-acl 1\nallow * orders\n"))
	if err != nil || v1.String() != "fastmq-acl 1\nallow * orders\n" {
		t.Fatalf("version 1: %v %q", err, v1)
	}
	cred := func(k socket.CurveKey) socket.PeerCredentials {
		return socket.PeerCredentials{Mechanism: "CURVE", ClientKey: k}
	}
	for _, tc := range []struct {
		name   string
		acl    *pull.ACL
		who    socket.CurveKey
		op     pull.ACLOp
		stream string
		want   bool
	}{
		{"reader reads", a, reader, pull.ACLRead, "orders", true},
		{"reader lists its stream", a, reader, pull.ACLList, "orders", true},
		{"reader lists every stream", a, reader, pull.ACLList, "*", false},
		{"reader seeks", a, reader, pull.ACLAdmin, "orders", false},
		{"lister lists every stream", a, lister, pull.ACLList, "*", true},
		{"lister lists a stream", a, lister, pull.ACLList, "orders", true},
		{"lister reads", a, lister, pull.ACLRead, "orders", false},
		{"lister seeks", a, lister, pull.ACLAdmin, "orders", false},
		{"admin seeks", a, admin, pull.ACLAdmin, "orders", true},
		{"admin replays dead letters", a, admin, pull.ACLAdmin, "orders.billing.dlq", true},
		{"admin lists", a, admin, pull.ACLList, "orders", true},
		{"admin reads", a, admin, pull.ACLRead, "orders", false},
		{"admin of another stream", a, admin, pull.ACLAdmin, "logs", false},
		{"version 1 reads", v1, reader, pull.ACLRead, "orders", true},
		{"version 1 lists", v1, reader, pull.ACLList, "orders", true},
		{"version 1 seeks", v1, reader, pull.ACLAdmin, "orders", false},
	} {
		if got := tc.acl.AllowsOp(cred(tc.who), tc.op, tc.stream); got != tc.want {
			t.Errorf("%s (%v %q): %v, want %v", tc.name, tc.op, tc.stream, got, tc.want)
		}
	}
}
