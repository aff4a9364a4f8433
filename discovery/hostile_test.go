package discovery

import (
	"bytes"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/hashicorp/go-msgpack/v2/codec"
)

// aliveWire is memberlist's alive message as it travels (memberlist's
// unexported "alive" struct, msgpack-encoded after a type byte).
type aliveWire struct {
	Incarnation uint32
	Node        string
	Addr        []byte
	Port        uint16
	Meta        []byte
	Vsn         []uint8
}

const memberlistAliveMsg = 4 // memberlist's aliveMsg message type

func encodeAlive(t testing.TB, a aliveWire) []byte { return encodeGossip(t, memberlistAliveMsg, &a) }

// encodeGossip encodes one of memberlist's messages as it travels: its
// type byte, then msg (a pointer to a struct shaped like memberlist's)
// msgpack-encoded.
func encodeGossip(t testing.TB, typ byte, msg any) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteByte(typ)
	if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(msg); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGossipRefusesPoisonedAlive proves that datagrams on an unencrypted
// gossip port cannot plant a member: an alive message with an empty name or
// no protocol versions (one such datagram used to make every later join
// fail with "Node ” protocol version (0) is incompatible"), and a few
// thousand random alive-typed datagrams, leave the member list as it was and
// a new node can still join.
func TestGossipRefusesPoisonedAlive(t *testing.T) {
	skipShort(t)
	seed := newNode(t, "seed", nil)
	conn, err := net.Dial("udp", seed.GossipAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	send := func(b []byte) {
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	lo := []byte{127, 0, 0, 1}
	poison := []aliveWire{
		{Incarnation: 1, Node: "", Addr: lo, Port: 1},
		{Incarnation: 1, Node: "", Addr: lo, Port: 1, Vsn: []uint8{1, 5, 5, 2, 5, 4}},
		{Incarnation: 1, Node: "ghost-novsn", Addr: lo, Port: 2},
		{Incarnation: 1, Node: "ghost-zerovsn", Addr: lo, Port: 3, Vsn: []uint8{0, 0, 0, 0, 0, 0}},
		{Incarnation: 1, Node: "ghost-badaddr", Addr: []byte{1, 2}, Port: 4, Vsn: []uint8{1, 5, 5, 2, 5, 4}},
		{Incarnation: 1, Node: "ghost-badmeta", Addr: lo, Port: 5, Meta: []byte{0xff, 0x01, 0x02}, Vsn: []uint8{1, 5, 5, 2, 5, 4}},
		{Incarnation: 1, Node: "ghost\x00ctl", Addr: lo, Port: 6, Vsn: []uint8{1, 5, 5, 2, 5, 4}},
	}
	for _, a := range poison {
		send(encodeAlive(t, a))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		b := make([]byte, 1+rng.IntN(1400))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		b[0] = memberlistAliveMsg
		send(b)
	}
	// A well-formed alive from a node that does not answer is accepted by
	// memberlist (and later declared failed); the datagrams above were
	// queued before it, so it shows up after they were processed.
	marker := aliveWire{Incarnation: 1, Node: "marker", Addr: lo, Port: 9, Meta: encodeMeta(t, nil), Vsn: []uint8{1, 5, 5, 2, 5, 4}}
	polls := 0
	testutil.WaitFor(t, "the marker member", 10*time.Second, func() bool {
		// memberlist drops datagrams while its handoff queue is full, so
		// the marker is sent again until it gets through.
		if polls%50 == 0 {
			send(encodeAlive(t, marker))
		}
		polls++
		for _, m := range seed.serf.Members() {
			if m.Name == "marker" {
				return true
			}
		}
		return false
	})
	for _, m := range seed.serf.Members() {
		switch m.Name {
		case "seed", "marker":
		default:
			t.Errorf("planted member %q (%v:%d, protocol %d..%d) is in the member list", m.Name, m.Addr, m.Port, m.ProtocolMin, m.ProtocolMax)
		}
	}
	// A real node still joins.
	j := newNode(t, "joiner", func(c *Config) { c.Seeds = []string{seed.GossipAddr()} })
	testutil.WaitFor(t, "joiner seen alive by the seed", 10*time.Second, func() bool {
		for _, m := range seed.Members() {
			if m.Name == "joiner" && m.Status == StatusAlive {
				return true
			}
		}
		return false
	})
	_ = j
}

// encodeMeta is serf's encoding of member tags: a magic byte and a msgpack map.
func encodeMeta(t testing.TB, tags map[string]string) []byte {
	t.Helper()
	if tags == nil {
		tags = map[string]string{}
	}
	var buf bytes.Buffer
	buf.WriteByte(0xff)
	if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(tags); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
