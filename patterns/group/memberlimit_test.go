package group_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// curveClient is an outside CURVE client of a publisher's group protocol:
// a DEALER with its own key sending the protocol's bytes (rawFrames).
type curveClient struct {
	t  testing.TB
	s  *socket.Socket
	id uint32
}

func (c *curveClient) call(r rawReq) (status uint8, count uint32) {
	c.t.Helper()
	c.id++
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.s.Send(ctx, socket.NewMsg(rawFrames(c.id, r)...)); err != nil {
		c.t.Fatal(err)
	}
	for {
		rep, err := c.s.Recv(ctx)
		if err != nil {
			c.t.Fatal(err)
		}
		if st, n, _, ok := rawReply(c.t, c.id, rep.Frames); ok {
			return st, n
		}
	}
}

// TestAttackMemberLimitByACL: a CURVE client the ACL limits to 2 members
// per group gets its third member refused (status 8), from another
// connection with its key too, while another client still joins and the
// limited one still joins another group.
func TestAttackMemberLimitByACL(t *testing.T) {
	dir := t.TempDir()
	alicePub, aliceSec := keypair(t)
	_, bobSec := keypair(t)
	acl, err := pull.ParseACL([]byte("fastmq-acl 2\nallow read * *\nlimit members 2 " + alicePub.Z85() + " s\n"))
	if err != nil {
		t.Fatal(err)
	}
	spub, ssec := keypair(t)
	p := &publisher{dir: dir, logs: map[string]*spool.Log{}}
	lookup := func(s string) (*spool.Log, bool) {
		p.mu.Lock()
		defer p.mu.Unlock()
		l, ok := p.logs[s]
		return l, ok
	}
	srv, err := pull.NewServer(pull.ServerConfig{Lookup: lookup, ACL: acl,
		Socket: socket.Config{CurveServer: true, CurveSecretKey: ssec, CurveAllowAnyClient: true}})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := group.NewServer(group.ServerConfig{Dir: filepath.Join(dir, "groups"), Lookup: lookup, Open: p.open, Send: srv,
		MemberLimit: func(env [][]byte, stream, _ string) int { return srv.MemberLimit(env, stream) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := group.Register(srv, gs); err != nil {
		t.Fatal(err)
	}
	p.srv, p.groups = srv, gs
	t.Cleanup(p.close)
	p.publish(t, "s", 100)
	dial := func(sec socket.CurveKey) *curveClient {
		s, err := socket.New(socket.Dealer, socket.Config{CurveServerKey: spub, CurveSecretKey: sec})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Connect(srv.Endpoints()[0]); err != nil {
			t.Fatal(err)
		}
		return &curveClient{t: t, s: s}
	}
	fetch := func(c *curveClient, grp, member string) uint8 {
		st, _ := c.call(rawReq{op: 1, maxRecords: 1, ackWaitMs: 30000, maxDeliver: 5, maxAckPending: 10, stream: "s", group: grp, member: member})
		return st
	}
	alice := dial(aliceSec)
	for _, m := range []string{"a1/1.x", "a2/1.x"} {
		if st := fetch(alice, "g", m); st != 0 {
			t.Fatalf("alice's member %s: status %d", m, st)
		}
	}
	if st := fetch(alice, "g", "a3/1.x"); st != 8 {
		t.Fatalf("alice's third member: status %d, want 8 (limit reached)", st)
	}
	if st := fetch(dial(aliceSec), "g", "a4/1.x"); st != 8 {
		t.Fatalf("alice's third member from another connection: status %d, want 8", st)
	}
	if st := fetch(alice, "g", "a1/1.x"); st != 0 {
		t.Fatalf("alice's first member again: status %d", st)
	}
	bob := dial(bobSec)
	for _, m := range []string{"b1/1.x", "b2/1.x", "b3/1.x"} {
		if st := fetch(bob, "g", m); st != 0 {
			t.Fatalf("bob's member %s: status %d", m, st)
		}
	}
	if st := fetch(alice, "g2", "a3/1.x"); st != 0 {
		t.Fatalf("alice's member in another group: status %d", st)
	}
}

func keypair(t testing.TB) (pub, sec socket.CurveKey) {
	t.Helper()
	pub, sec, err := socket.NewCurveKeypair()
	if err != nil {
		t.Fatal(err)
	}
	return pub, sec
}
