package fastmq_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
)

// groupFetch sends a raw group fetch (the group protocol's version 0x82
// header) for member of group g of stream from d and returns the reply's
// status.
func groupFetch(t *testing.T, d *socket.Socket, id uint32, stream, g, member string) uint8 {
	t.Helper()
	h := make([]byte, 38)
	h[0], h[1] = 0x82, 1
	binary.BigEndian.PutUint32(h[2:], id)
	binary.BigEndian.PutUint32(h[6:], 1)      // max records
	binary.BigEndian.PutUint32(h[10:], 1<<20) // max bytes
	binary.BigEndian.PutUint32(h[18:], 30000) // ack wait, ms
	binary.BigEndian.PutUint16(h[22:], 5)     // max deliver
	binary.BigEndian.PutUint32(h[24:], 10)    // max ack pending
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Send(ctx, socket.NewMsg(h, []byte(stream), []byte(g), []byte(member), nil)); err != nil {
		t.Fatal(err)
	}
	for {
		rep, err := d.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Frames) >= 2 && len(rep.Frames[0]) == 10 && binary.BigEndian.Uint32(rep.Frames[0][2:]) == id {
			return rep.Frames[0][1]
		}
	}
}

// TestACLMemberLimitOnNode: a node's ACL "limit members" line reaches its
// group server: the limited CURVE client's third member in a group is
// refused (status 8, limit reached), another client's is not.
func TestACLMemberLimitOnNode(t *testing.T) {
	npub, nsec := curveKeys(t)
	apub, asec := curveKeys(t)
	bpub, bsec := curveKeys(t)
	acl, err := pull.ParseACL([]byte("fastmq-acl 2\nallow read * jobs\nlimit members 2 " + apub.Z85() + " jobs\n"))
	if err != nil {
		t.Fatal(err)
	}
	n := secureNode(t, "a", func(c *fastmq.Config) { c.CurveKey, c.ACL, c.CurveTrusted = nsec, acl, []socket.CurveKey{apub, bpub} })
	publish(t, n, "jobs", 10)
	dial := func(sec socket.CurveKey) *socket.Socket {
		d, err := socket.New(socket.Dealer, socket.Config{CurveServerKey: npub, CurveSecretKey: sec})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		if err := d.Connect(n.SpoolEndpoint()); err != nil {
			t.Fatal(err)
		}
		return d
	}
	alice, bob := dial(asec), dial(bsec)
	for i, want := range []uint8{0, 0, 8} {
		if st := groupFetch(t, alice, uint32(i+1), "jobs", "g", string(rune('a'+i))+"/1.x"); st != want {
			t.Fatalf("alice's member %d: status %d, want %d", i+1, st, want)
		}
	}
	for i := range 3 {
		if st := groupFetch(t, bob, uint32(i+1), "jobs", "g", string(rune('a'+i))+"/2.x"); st != 0 {
			t.Fatalf("bob's member %d: status %d", i+1, st)
		}
	}
}
