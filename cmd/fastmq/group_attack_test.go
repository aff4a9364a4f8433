package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/fastmq/fastmq/internal/testutil"
)

// rawGroupClient is an outside attacker of a publisher's group protocol:
// a go-zeromq DEALER sending the bytes of the protocol's spec (version
// 0x82), none of the project's client code.
type rawGroupClient struct {
	t  *testing.T
	s  zmq4.Socket
	id uint32
}

func dialRaw(t *testing.T, ep string) *rawGroupClient {
	t.Helper()
	s := zmq4.NewDealer(context.Background())
	if err := s.Dial(ep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &rawGroupClient{t: t, s: s}
}

// call sends op for member of group g of stream jobs with the given
// header fields and body, and returns the reply's status and count.
func (c *rawGroupClient) call(op uint8, g, member string, maxRecords, ackWaitMs uint32, maxDeliver uint16, body []byte) (uint8, uint32, []byte) {
	c.t.Helper()
	c.id++
	h := make([]byte, 38)
	h[0], h[1] = 0x82, op
	binary.BigEndian.PutUint32(h[2:], c.id)
	binary.BigEndian.PutUint32(h[6:], maxRecords)
	binary.BigEndian.PutUint32(h[10:], 1<<20)
	binary.BigEndian.PutUint32(h[18:], ackWaitMs)
	binary.BigEndian.PutUint16(h[22:], maxDeliver)
	binary.BigEndian.PutUint32(h[24:], 65536)
	if err := c.s.Send(zmq4.NewMsgFrom(h, []byte("jobs"), []byte(g), []byte(member), body)); err != nil {
		c.t.Fatal(err)
	}
	for {
		rep, err := c.s.Recv()
		if err != nil {
			c.t.Fatal(err)
		}
		if len(rep.Frames) >= 2 && len(rep.Frames[0]) == 10 && binary.BigEndian.Uint32(rep.Frames[0][2:]) == c.id {
			return rep.Frames[0][1], binary.BigEndian.Uint32(rep.Frames[0][6:]), rep.Frames[1]
		}
	}
}

var nodeEndpoint = regexp.MustCompile(`msg="node started".* endpoint=(tcp://\S+)`)

// TestCLIGroupAttacks runs the group attacks of issue 31 (items 11 to
// 13) against a `fastmq publish` process, from raw ZMTP clients: a late
// member cannot rewrite the group's settings, another connection cannot
// use a member's id, and a flood of fake members is refused past the
// group's most members.
func TestCLIGroupAttacks(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	pub := startCLI(t, "publish", "--name", "pub", "--data", filepath.Join(dir, "pub"), "--gossip", freePort(t), "--stream", "jobs", "--ack")
	for i := range 50 {
		pub.feed(fmt.Sprint("r", i))
		if got := pub.line(); got != fmt.Sprint(i) {
			t.Fatalf("ack %d: %q\n%s", i, got, pub.stderr())
		}
	}
	var ep string
	testutil.WaitFor(t, "the publisher's endpoint in its log", 10*time.Second, func() bool {
		if m := nodeEndpoint.FindStringSubmatch(pub.stderr()); m != nil {
			ep = m[1]
			return true
		}
		return false
	})
	victim := dialRaw(t, ep)
	st, n, data := victim.call(1, "billing", "victim/1.a", 4, 30000, 5, nil)
	if st != 0 || n != 4 {
		t.Fatalf("the victim's fetch: status %d, %d records", st, n)
	}
	off, del := binary.BigEndian.Uint64(data), binary.BigEndian.Uint32(data[8:])
	evil := dialRaw(t, ep)
	// Item 11: a late member asking a 1 ms lease and one delivery.
	if st, _, _ := evil.call(1, "billing", "evil/1.b", 1, 1, 1, nil); st != 0 {
		t.Fatalf("the late member's fetch: status %d", st)
	}
	time.Sleep(200 * time.Millisecond)
	// Item 12: the victim's id from the attacker's connection.
	ack := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, off), del), 0)
	ack = append(ack, 0)
	if st, _, _ := evil.call(2, "billing", "victim/1.a", 0, 0, 0, ack); st == 0 || st == 7 {
		t.Fatalf("an ack with the victim's id from another connection: status %d", st)
	}
	if st, _, _ := evil.call(6, "billing", "victim/1.a", 0, 0, 0, nil); st == 0 {
		t.Fatal("a leave with the victim's id from another connection was answered ok")
	}
	// The victim's leases did not run out at 1 ms: its ack goes through.
	if st, _, data := victim.call(2, "billing", "victim/1.a", 0, 0, 0, ack); st != 0 {
		t.Fatalf("the victim's ack: status %d %s", st, data)
	}
	// Item 13: fake members beyond the group's most (256, the victim
	// and the late member among them) are refused with status 8.
	refused := 0
	for i := range 300 {
		st, _, data := evil.call(1, "billing", fmt.Sprintf("fake%d/1.x", i), 1, 3600000, 5, nil)
		switch st {
		case 0:
		case 8:
			refused++
		default:
			t.Fatalf("fake member %d: status %d %s", i, st, data)
		}
	}
	if refused != 300-254 {
		t.Fatalf("%d fake members refused, want %d", refused, 300-254)
	}
}
