package group_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// fetchSpy counts a publisher's fetch requests.
type fetchSpy struct {
	*group.Server
	fetches atomic.Int32
}

func (s *fetchSpy) Handle(env [][]byte, frames [][]byte) {
	if req, err := wire.DecodeRequest(frames); err == nil && req.Op == wire.OpFetch {
		s.fetches.Add(1)
	}
	s.Server.Handle(env, frames)
}

// Records appended one at a time reach a member through its open fetches
// (FlagStream): a fetch answered with one record stays open for the rest
// of its count, so the member sends one fetch per half buffer of
// records, not one per record; every record comes once, in order.
func TestStreamFetchStaysOpen(t *testing.T) {
	var spy *fetchSpy
	p := newPublisherWrapped(t, t.TempDir(), func(*group.ServerConfig) {}, func(gs *group.Server, _ *pull.Server) pull.Extension {
		spy = &fetchSpy{Server: gs}
		return spy
	})
	p.open("s")
	// A fetch that waits out MaxWait with nothing to lease ends and is
	// sent again: a long one, so that a slow moment of a loaded machine
	// does not count.
	m := member(t, group.MemberConfig{Name: "a", Buffer: 32, MaxWait: time.Minute}, p)
	const n = 60
	for want := uint64(0); want < n; want++ {
		p.publish(t, "s", 1)
		if got := nextAck(t, m, 1); got[0] != want {
			t.Fatalf("got offset %d, want %d", got[0], want)
		}
	}
	t.Logf("%d fetches for %d records", spy.fetches.Load(), n)
	// Two loops of 16 slots each: about n/16 fetches, plus the first
	// two; a fetch per record would make n.
	if f := spy.fetches.Load(); f > n/16+4 {
		t.Fatalf("%d fetches for %d records appended one at a time, want at most %d", f, n, n/16+4)
	}
}

// A publisher closes an open stream fetch whose count is used with a
// last reply (StatusOK) and answers a request decoded from the wire the
// same way: the reply statuses a member sees for one fetch are open,
// open, ..., ok.
func TestStreamFetchReplies(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 1)
	sock, err := socket.New(socket.Dealer, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	if err := sock.Connect(p.srv.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recv := func() wire.Reply {
		t.Helper()
		m, err := sock.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := wire.DecodeReply(m.Frames, true)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	req := &wire.Request{Op: wire.OpFetch, ID: 7, MaxRecords: 3, MaxBytes: 1 << 20, WaitMillis: 10000,
		AckWaitMillis: 30000, MaxAckPending: 100, Flags: wire.FlagStream, Stream: "s", Group: "g", Member: "x/1"}
	if err := sock.Send(ctx, socket.Msg{Frames: wire.EncodeRequest(req)}); err != nil {
		t.Fatal(err)
	}
	if rep := recv(); rep.Status != wire.StatusOpen || rep.ID != 7 || rep.Count != 1 {
		t.Fatalf("first reply: status %d id %d count %d, want open, 7, 1", rep.Status, rep.ID, rep.Count)
	}
	p.publish(t, "s", 1)
	if rep := recv(); rep.Status != wire.StatusOpen || rep.ID != 7 || rep.Count != 1 {
		t.Fatalf("second reply: status %d id %d count %d, want open, 7, 1", rep.Status, rep.ID, rep.Count)
	}
	p.publish(t, "s", 5)
	if rep := recv(); rep.Status != wire.StatusOK || rep.ID != 7 || rep.Count != 1 {
		t.Fatalf("last reply: status %d id %d count %d, want ok, 7, 1 (the rest of the count)", rep.Status, rep.ID, rep.Count)
	}
}

// A stream fetch cut short by its byte limit ends (its member asks again
// at once, for what the log still holds) instead of staying open: an
// open fetch waits for the next append, and its replies' bytes would
// add up past the one fetch's the publisher's queue for the member
// holds.
func TestStreamFetchEndsAtByteLimit(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	l, err := p.open("s")
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 300<<10)
	for range 40 {
		if _, err := l.Append(context.Background(), spool.Record{Value: big}); err != nil {
			t.Fatal(err)
		}
	}
	call := rawCaller(t, p)
	rep := call(&wire.Request{Op: wire.OpFetch, MaxRecords: 100, MaxBytes: 1 << 20, WaitMillis: 8000,
		AckWaitMillis: 30000, MaxAckPending: 1000, Flags: wire.FlagStream, Stream: "s", Group: "g", Member: "x/1"})
	if rep.Status != wire.StatusOK || rep.Count == 0 || rep.Count >= 40 {
		t.Fatalf("reply: status %d, %d records; want ok (ended at the byte limit) with a few", rep.Status, rep.Count)
	}
	// And a member reading big records one at a time gets them all,
	// with leases that would not run out during the test.
	m := member(t, group.MemberConfig{Name: "a", Buffer: 64, AckWait: time.Hour}, p)
	nextAck(t, m, int(40-rep.Count))
}

// nextAck takes n records from m with Next and acknowledges each, failing
// the test on an error (within 20 s in all); it returns their offsets in
// the order they came.
func nextAck(t *testing.T, m *group.Member, n int) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	offs := make([]uint64, 0, n)
	for len(offs) < n {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatalf("after %d of %d records: %v", len(offs), n, err)
		}
		if err := msg.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		offs = append(offs, msg.Offset)
	}
	return offs
}
