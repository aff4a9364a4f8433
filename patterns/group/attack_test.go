package group_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
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
	h := make([]byte, 38)
	h[0], h[1] = 0x82, r.op
	binary.BigEndian.PutUint32(h[2:], a.id)
	binary.BigEndian.PutUint32(h[6:], r.maxRecords)
	binary.BigEndian.PutUint32(h[10:], 1<<20)
	binary.BigEndian.PutUint32(h[14:], r.waitMs)
	binary.BigEndian.PutUint32(h[18:], r.ackWaitMs)
	binary.BigEndian.PutUint16(h[22:], r.maxDeliver)
	binary.BigEndian.PutUint32(h[24:], r.maxAckPending)
	h[28] = r.startKind
	binary.BigEndian.PutUint64(h[29:], r.startValue)
	msg := zmq4.NewMsgFrom(h, []byte(r.stream), []byte(r.group), []byte(r.member), r.body)
	if err := a.s.Send(msg); err != nil {
		a.t.Fatal(err)
	}
	for {
		rep, err := a.s.Recv()
		if err != nil {
			a.t.Fatal(err)
		}
		if len(rep.Frames) < 2 || len(rep.Frames[0]) != 10 {
			a.t.Fatalf("reply of %d frames", len(rep.Frames))
		}
		if binary.BigEndian.Uint32(rep.Frames[0][2:]) != a.id {
			continue // a late reply to an earlier request
		}
		return rep.Frames[0][1], binary.BigEndian.Uint32(rep.Frames[0][6:]), rep.Frames[1]
	}
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
