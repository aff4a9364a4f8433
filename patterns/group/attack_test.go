package group_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/plain"

	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// attacker is an outside client of a publisher's group protocol: a
// go-zeromq DEALER sending the protocol's bytes as the spec in the
// internal package wire lays them out, with none of this package's code.
type attacker struct {
	t  testing.TB
	s  zmq4.Socket
	id uint32
}

func newAttacker(t testing.TB, endpoint string) *attacker {
	t.Helper()
	s := zmq4.NewDealer(context.Background())
	if err := s.Dial(endpoint); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &attacker{t: t, s: s}
}

// rawReq is a request's header fields (see the wire spec, version 0x82).
type rawReq struct {
	op                    uint8
	maxRecords, ackWaitMs uint32
	maxDeliver            uint16
	maxAckPending         uint32
	stream, group, member string
	body                  []byte
	waitMs                uint32
	startKind             uint8
	startValue            uint64
}

// call sends r and returns the reply's status, count and data.
func (a *attacker) call(r rawReq) (status uint8, count uint32, data []byte) {
	a.t.Helper()
	a.id++
	if err := a.s.Send(zmq4.NewMsgFrom(rawFrames(a.id, r)...)); err != nil {
		a.t.Fatal(err)
	}
	for {
		rep, err := a.s.Recv()
		if err != nil {
			a.t.Fatal(err)
		}
		if st, n, data, ok := rawReply(a.t, a.id, rep.Frames); ok {
			return st, n, data
		}
	}
}

// rawFrames encodes request id of r as its frames.
func rawFrames(id uint32, r rawReq) [][]byte {
	h := make([]byte, 38)
	h[0], h[1] = 0x82, r.op
	binary.BigEndian.PutUint32(h[2:], id)
	binary.BigEndian.PutUint32(h[6:], r.maxRecords)
	binary.BigEndian.PutUint32(h[10:], 1<<20)
	binary.BigEndian.PutUint32(h[14:], r.waitMs)
	binary.BigEndian.PutUint32(h[18:], r.ackWaitMs)
	binary.BigEndian.PutUint16(h[22:], r.maxDeliver)
	binary.BigEndian.PutUint32(h[24:], r.maxAckPending)
	h[28] = r.startKind
	binary.BigEndian.PutUint64(h[29:], r.startValue)
	return [][]byte{h, []byte(r.stream), []byte(r.group), []byte(r.member), r.body}
}

// rawReply decodes the reply frames to request id: its status, count and
// data; not ok for a late reply to an earlier request.
func rawReply(t testing.TB, id uint32, frames [][]byte) (status uint8, count uint32, data []byte, ok bool) {
	t.Helper()
	if len(frames) < 2 || len(frames[0]) != 10 {
		t.Fatalf("reply of %d frames", len(frames))
	}
	if binary.BigEndian.Uint32(frames[0][2:]) != id {
		return 0, 0, nil, false
	}
	return frames[0][1], binary.BigEndian.Uint32(frames[0][6:]), frames[1], true
}

// rawRecord is one record of a fetch reply: its offset and delivery.
type rawRecord struct {
	offset   uint64
	delivery uint32
}

// records decodes a fetch reply's data (offset, delivery, time, headers,
// value per record).
func records(t testing.TB, count uint32, data []byte) []rawRecord {
	t.Helper()
	var out []rawRecord
	p := 0
	for range count {
		r := rawRecord{offset: binary.BigEndian.Uint64(data[p:]), delivery: binary.BigEndian.Uint32(data[p+8:])}
		p += 20
		nh := int(binary.BigEndian.Uint16(data[p:]))
		p += 2
		for range nh {
			p += 2 + int(binary.BigEndian.Uint16(data[p:]))
			p += 4 + int(binary.BigEndian.Uint32(data[p:]))
		}
		p += 4 + int(binary.BigEndian.Uint32(data[p:]))
		out = append(out, r)
	}
	return out
}

// entry is a settle entry: offset, delivery, no delay, reason.
func entry(off uint64, delivery uint32, reason string) []byte {
	b := binary.BigEndian.AppendUint64(nil, off)
	b = binary.BigEndian.AppendUint32(b, delivery)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = append(b, byte(len(reason)))
	return append(b, reason...)
}

// A member joining later with AckWait 1 ms and MaxDeliver 1 does not
// rewrite the group's settings: the real member's leases keep their
// AckWait, nothing goes to dead letters, and only an operator's
// Configure changes the settings (with AckWait held to its floor).
func TestAttackLateMemberCannotRewriteSettings(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 100)
	ep := p.srv.Endpoints()[0]
	real := newAttacker(t, ep)
	st, n, _ := real.call(rawReq{op: 1, maxRecords: 10, ackWaitMs: 30000, maxDeliver: 5, maxAckPending: 100, stream: "s", group: "g", member: "real/1.a"})
	if st != 0 || n != 10 {
		t.Fatalf("real member's fetch: status %d, %d records", st, n)
	}
	evil := newAttacker(t, ep)
	if st, _, _ := evil.call(rawReq{op: 1, maxRecords: 1, ackWaitMs: 1, maxDeliver: 1, maxAckPending: 1, stream: "s", group: "g", member: "evil/1.b"}); st != 0 {
		t.Fatalf("late member's fetch: status %d", st)
	}
	gs := p.groups.Stats()["s/g"]
	if gs.AckWait != 30*time.Second || gs.MaxDeliver != 5 {
		t.Fatalf("a later member's fetch set AckWait %v MaxDeliver %d", gs.AckWait, gs.MaxDeliver)
	}
	time.Sleep(300 * time.Millisecond)
	gs = p.groups.Stats()["s/g"]
	if gs.DeadLetters != 0 || gs.Expired != 0 || gs.InFlight != 11 {
		t.Fatalf("after the late member: %d dead letters, %d expired, %d in flight, want 0, 0 and 11", gs.DeadLetters, gs.Expired, gs.InFlight)
	}
	// The operator's op changes them, AckWait no shorter than its floor.
	if st, _, data := evil.call(rawReq{op: 13, ackWaitMs: 1, maxDeliver: 3, stream: "s", group: "g", member: "admin"}); st != 0 {
		t.Fatalf("configure: status %d %s", st, data)
	}
	gs = p.groups.Stats()["s/g"]
	if gs.AckWait != 100*time.Millisecond || gs.MaxDeliver != 3 {
		t.Fatalf("after configure: AckWait %v MaxDeliver %d, want the floor 100ms and 3", gs.AckWait, gs.MaxDeliver)
	}
}

// A second connection sending another member's id cannot ack, nak, term
// or release that member's leases, nor fetch as it: the id is bound to
// the connection that first used it. Once that connection is gone, the
// id may move (a member reconnecting).
func TestAttackMemberIDHijack(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 20)
	ep := p.srv.Endpoints()[0]
	victim := newAttacker(t, ep)
	st, n, data := victim.call(rawReq{op: 1, maxRecords: 8, ackWaitMs: 60000, maxDeliver: 5, maxAckPending: 100, stream: "s", group: "g", member: "victim/1.a"})
	if st != 0 || n != 8 {
		t.Fatalf("victim's fetch: status %d, %d records", st, n)
	}
	recs := records(t, n, data)
	evil := newAttacker(t, ep)
	for _, c := range []struct {
		name string
		op   uint8
		body []byte
	}{
		{"ack", 2, entry(recs[0].offset, recs[0].delivery, "")},
		{"nak", 3, entry(recs[1].offset, recs[1].delivery, "")},
		{"term", 5, entry(recs[2].offset, recs[2].delivery, "stolen")},
		{"ack ranges", 12, binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, recs[3].offset), 1), recs[3].delivery)},
		{"leave", 6, nil},
		{"fetch", 1, nil},
	} {
		st, _, data := evil.call(rawReq{op: c.op, maxRecords: 1, ackWaitMs: 60000, maxDeliver: 5, stream: "s", group: "g", member: "victim/1.a", body: c.body})
		if st == 0 || st == 7 {
			t.Errorf("%s with the victim's id from another connection: status %d %q", c.name, st, data)
		}
	}
	// Nor does claiming a new incarnation of the victim's node release
	// the leases of the old one while its connection is open.
	if st, _, data := evil.call(rawReq{op: 1, maxRecords: 1, ackWaitMs: 60000, maxDeliver: 5, stream: "s", group: "g", member: "victim/2.z"}); st != 0 {
		t.Fatalf("fetch as a new incarnation: status %d %q", st, data)
	}
	gs := p.groups.Stats()["s/g"]
	if gs.InFlight != 9 || gs.Acked != 0 || gs.Naked != 0 || gs.DeadLetters != 0 || gs.Released != 0 {
		t.Fatalf("after the hijack: %+v", gs.Counters)
	}
	// The victim's own acks go through.
	if st, _, data := victim.call(rawReq{op: 2, stream: "s", group: "g", member: "victim/1.a", body: entry(recs[0].offset, recs[0].delivery, "")}); st != 0 {
		t.Fatalf("the victim's ack: status %d %q", st, data)
	}
	// The victim's connection gone, its id moves to a new one.
	victim.s.Close()
	testutil.WaitFor(t, "a new connection taking the id of a gone one", 10*time.Second, func() bool {
		st, _, _ := evil.call(rawReq{op: 2, stream: "s", group: "g", member: "victim/1.a", body: entry(recs[1].offset, recs[1].delivery, "")})
		return st == 0
	})
}

// Fake members cannot lease a whole stream for an hour: a group takes at
// most MaxMembers members (the one beyond is refused, status 8) and a
// member at most MaxMemberLeases leases, whatever it asks, so a member
// that was there before the flood still gets records.
func TestAttackMemberFlood(t *testing.T) {
	p := newPublisherWith(t, t.TempDir(), func(c *group.ServerConfig) { c.MaxMembers, c.MaxMemberLeases = 8, 200 })
	p.publish(t, "s", 3000)
	ep := p.srv.Endpoints()[0]
	real := newAttacker(t, ep) // plays the real member: its first fetch
	if st, n, _ := real.call(rawReq{op: 1, maxRecords: 1, ackWaitMs: 30000, maxDeliver: 5, maxAckPending: 100, stream: "s", group: "g", member: "real/1.a"}); st != 0 || n != 1 {
		t.Fatalf("the real member's fetch: status %d, %d records", st, n)
	}
	evil := newAttacker(t, ep)
	refused, leased := 0, 0
	for i := range 73 {
		st, n, _ := evil.call(rawReq{op: 1, maxRecords: 4096, ackWaitMs: 3600000, maxDeliver: 5, maxAckPending: 65536,
			stream: "s", group: "g", member: fmt.Sprintf("fake%d/1.x", i)})
		switch st {
		case 0:
			leased += int(n)
			if n > 200 {
				t.Fatalf("fake member %d leased %d records, more than MaxMemberLeases", i, n)
			}
		case 8:
			refused++
		default:
			t.Fatalf("fake member %d: status %d", i, st)
		}
	}
	if refused != 73-7 || leased != 7*200 {
		t.Fatalf("%d fake members refused, %d records leased to the rest; want %d and %d", refused, leased, 73-7, 7*200)
	}
	if st, n, _ := real.call(rawReq{op: 1, maxRecords: 100, ackWaitMs: 30000, maxDeliver: 5, maxAckPending: 100, stream: "s", group: "g", member: "real/1.a"}); st != 0 || n != 99 {
		t.Fatalf("the real member after the flood: status %d, %d records, want 99 more", st, n)
	}
}

// A member id bound to a PLAIN (or CURVE) identity moves to a new
// connection only with that identity: once the victim's connection is
// gone, another user's connection still cannot take its id; the victim
// reconnecting can.
func TestAttackMemberIDBoundToKey(t *testing.T) {
	dir := t.TempDir()
	p := &publisher{dir: dir, logs: map[string]*spool.Log{}}
	lookup := func(s string) (*spool.Log, bool) {
		p.mu.Lock()
		defer p.mu.Unlock()
		l, ok := p.logs[s]
		return l, ok
	}
	srv, err := pull.NewServer(pull.ServerConfig{Lookup: lookup, Socket: socket.Config{PlainAuth: func(string, string) bool { return true }}})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := group.NewServer(group.ServerConfig{Dir: filepath.Join(dir, "groups"), Lookup: lookup, Open: p.open, Send: srv})
	if err != nil {
		t.Fatal(err)
	}
	if err := group.Register(srv, gs); err != nil {
		t.Fatal(err)
	}
	p.srv, p.groups = srv, gs
	t.Cleanup(p.close)
	p.publish(t, "s", 10)
	ep := srv.Endpoints()[0]
	dialAs := func(user string) *attacker {
		s := zmq4.NewDealer(context.Background(), zmq4.WithSecurity(plain.Security(user, "pw")))
		if err := s.Dial(ep); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return &attacker{t: t, s: s}
	}
	victim := dialAs("alice")
	st, n, data := victim.call(rawReq{op: 1, maxRecords: 2, ackWaitMs: 60000, maxDeliver: 5, stream: "s", group: "g", member: "victim/1.a"})
	if st != 0 || n != 2 {
		t.Fatalf("victim's fetch: status %d, %d records", st, n)
	}
	recs := records(t, n, data)
	victim.s.Close()
	evil := dialAs("mallory")
	time.Sleep(200 * time.Millisecond) // the victim's connection is gone by now
	if st, _, _ := evil.call(rawReq{op: 2, stream: "s", group: "g", member: "victim/1.a", body: entry(recs[0].offset, recs[0].delivery, "")}); st == 0 || st == 7 {
		t.Fatalf("another user's ack with the gone victim's id: status %d", st)
	}
	back := dialAs("alice")
	testutil.WaitFor(t, "the victim back on a new connection", 10*time.Second, func() bool {
		st, _, _ := back.call(rawReq{op: 2, stream: "s", group: "g", member: "victim/1.a", body: entry(recs[0].offset, recs[0].delivery, "")})
		return st == 0
	})
}
