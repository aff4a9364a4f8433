package group_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/socket"
)

// An OpAckRanges request acks the leases its ranges name and refuses,
// per offset, the ones the member does not hold; a member's Ack goes
// through it and a refused one gives a *RefusedError.
func TestAckRanges(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 4)
	ctx := context.Background()
	a := member(t, group.MemberConfig{Name: "a", Buffer: 4}, p)
	held := map[uint64]*group.Message{}
	for len(held) < 4 {
		msg, err := a.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held[msg.Offset] = msg
	}
	p.publish(t, "s", 2)      // 4 and 5; 6 is never written
	p.groups.ShareMemberIDs() // a's id from the test's socket
	sock, err := socket.New(socket.Dealer, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	if err := sock.Connect(p.srv.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Offsets 0..3 are a's (delivery 1); 6 was never leased, nor
	// written. Another member's ranges are all refused.
	req := &wire.Request{Op: wire.OpAckRanges, Stream: "s", Group: "g", Member: a.ID(),
		Ranges: []wire.Range{{Offset: 0, Count: 2, Delivery: 1}, {Offset: 2, Count: 1, Delivery: 2}, {Offset: 6, Count: 1, Delivery: 1}}}
	for _, mem := range []string{"b/x", a.ID()} {
		req.Member = mem
		if err := sock.Send(cctx, socket.Msg{Frames: wire.EncodeRequest(req)}); err != nil {
			t.Fatal(err)
		}
		m, err := sock.Recv(cctx)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := wire.DecodeReply(m.Frames, false)
		if err != nil {
			t.Fatal(err)
		}
		refused := map[uint64]uint8{}
		for i := 0; i+9 <= len(rep.Data); i += 9 {
			refused[binary.BigEndian.Uint64(rep.Data[i:])] = rep.Data[i+8]
		}
		want := map[uint64]uint8{2: group.RefusedNotLeased, 6: group.RefusedUnknown}
		if mem != a.ID() {
			want = map[uint64]uint8{0: group.RefusedNotLeased, 1: group.RefusedNotLeased, 2: group.RefusedNotLeased, 6: group.RefusedUnknown}
		}
		if rep.Status != wire.StatusPartial || len(refused) != len(want) {
			t.Fatalf("member %s: status %d, refused %v, want %v", mem, rep.Status, refused, want)
		}
		for o, c := range want {
			if refused[o] != c {
				t.Fatalf("member %s: refused %v, want %v", mem, refused, want)
			}
		}
	}
	if st := p.groups.Stats()["s/g"]; st.Acked != 2 || st.Floor != 2 {
		t.Fatalf("after acking 0 and 1: %+v", st)
	}
	// The member's own acks: 0 was acked above (refused), 2 and 3 are
	// acked now.
	if err := held[0].Ack(ctx); !errors.Is(err, group.ErrRefused) {
		t.Fatalf("ack of a settled record: %v", err)
	}
	for _, o := range []uint64{2, 3} {
		if err := held[o].Ack(ctx); err != nil {
			t.Fatalf("ack %d: %v", o, err)
		}
	}
	if st := p.groups.Stats()["s/g"]; st.Acked != 4 || st.Floor != 4 {
		t.Fatalf("after acking 0..3: %+v", st)
	}
}

// Records leased together are settled in parts and in any order: acks
// of some, a nak and an in-progress of others in the middle, a second ack
// of one already acked (refused; another member's ack is refused in
// TestRunSnapshotAndBreak). Every count stays right, the naked record
// comes back once, and every record ends acknowledged once.
func TestLeaseSettledInParts(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 10)
	ctx := context.Background()
	a := member(t, group.MemberConfig{Name: "a", Buffer: 10, MaxAckPending: 10}, p)
	held := map[uint64]*group.Message{}
	for len(held) < 10 {
		msg, err := a.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held[msg.Offset] = msg
	}
	for _, o := range []uint64{7, 0, 1, 2} {
		if err := held[o].Ack(ctx); err != nil {
			t.Fatalf("ack %d: %v", o, err)
		}
	}
	if st := p.groups.Stats()["s/g"]; st.Acked != 4 || st.Floor != 3 || st.Pending != 6 || st.InFlight != 6 {
		t.Fatalf("after acking 0, 1, 2 and 7: %+v", st)
	}
	if err := held[1].Ack(ctx); !errors.Is(err, group.ErrRefused) {
		t.Fatalf("second ack of 1: %v", err)
	}
	if err := held[5].InProgress(ctx); err != nil {
		t.Fatalf("in progress 5: %v", err)
	}
	if err := held[4].Nak(ctx, 0); err != nil {
		t.Fatalf("nak 4: %v", err)
	}
	if st := p.groups.Stats()["s/g"]; st.Pending != 6 || st.Naked != 1 { // 4 may be leased again already
		t.Fatalf("after the nak of 4: %+v", st)
	}
	if err := held[7].Ack(ctx); !errors.Is(err, group.ErrRefused) {
		t.Fatalf("second ack of 7, after the run was broken: %v", err)
	}
	for _, o := range []uint64{3, 5, 6, 8, 9} {
		if err := held[o].Ack(ctx); err != nil {
			t.Fatalf("ack %d: %v", o, err)
		}
	}
	again, err := a.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again.Offset != 4 || again.Delivery != 2 {
		t.Fatalf("redelivered %d (delivery %d), want 4 (delivery 2)", again.Offset, again.Delivery)
	}
	if err := again.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if st := p.groups.Stats()["s/g"]; st.Acked != 10 || st.Floor != 10 || st.Pending != 0 || st.Members != 0 {
		t.Fatalf("at the end: %+v", st)
	}
}
