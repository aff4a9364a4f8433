package group_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/discovery/discoverytest"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// newPublisherWith is newPublisher with a say in the group server's
// configuration.
func newPublisherWith(t testing.TB, dir string, edit func(*group.ServerConfig)) *publisher {
	t.Helper()
	return newPublisherWrapped(t, dir, edit, nil)
}

// newPublisherWrapped is newPublisherWith whose group requests go to
// wrap(group server, spool server) when wrap is set.
func newPublisherWrapped(t testing.TB, dir string, edit func(*group.ServerConfig), wrap func(*group.Server, *pull.Server) pull.Extension) *publisher {
	t.Helper()
	p := &publisher{dir: dir, logs: map[string]*spool.Log{}}
	lookup := func(s string) (*spool.Log, bool) {
		p.mu.Lock()
		defer p.mu.Unlock()
		l, ok := p.logs[s]
		return l, ok
	}
	srv, err := pull.NewServer(pull.ServerConfig{Lookup: lookup})
	if err != nil {
		t.Fatal(err)
	}
	cfg := group.ServerConfig{Dir: filepath.Join(dir, "groups"), Lookup: lookup, Open: p.open, Send: srv}
	edit(&cfg)
	gs, err := group.NewServer(cfg)
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	var ext pull.Extension = gs
	if wrap != nil {
		ext = wrap(gs, srv)
	}
	if err := group.Register(srv, ext); err != nil {
		t.Fatal(err)
	}
	p.srv, p.groups = srv, gs
	t.Cleanup(p.close)
	return p
}

// rawCaller sends group requests on a DEALER of its own.
func rawCaller(t *testing.T, p *publisher) func(r *wire.Request) wire.Reply {
	t.Helper()
	sock, err := socket.New(socket.Dealer, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	if err := sock.Connect(p.srv.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
	return func(r *wire.Request) wire.Reply {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := sock.Send(ctx, socket.Msg{Frames: wire.EncodeRequest(r)}); err != nil {
			t.Fatal(err)
		}
		m, err := sock.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := wire.DecodeReply(m.Frames, r.Op == wire.OpFetch)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
}

// A publisher keeps at most MaxGroups groups: a fetch naming one more is
// refused with an error that says so, and neither the server's state nor
// its directory grows.
func TestMaxGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 1024 groups")
	}
	dir := t.TempDir()
	p := newPublisher(t, dir)
	p.publish(t, "s", 1)
	call := rawCaller(t, p)
	for i := 0; i < group.MaxGroups; i++ {
		rep := call(&wire.Request{Op: wire.OpFetch, ID: uint32(i), MaxRecords: 1, Stream: "s", Group: fmt.Sprintf("g%d", i), Member: "m/1"})
		if rep.Status != wire.StatusOK || len(rep.Records) != 1 {
			t.Fatalf("group %d: status %d, %d records: %s", i, rep.Status, len(rep.Records), rep.Data)
		}
	}
	rep := call(&wire.Request{Op: wire.OpFetch, ID: 9999, MaxRecords: 1, Stream: "s", Group: "one-too-many", Member: "m/1"})
	if rep.Status == wire.StatusOK || !strings.Contains(string(rep.Data), "MaxGroups") || !strings.Contains(string(rep.Data), "1024") {
		t.Fatalf("group %d: status %d %q, want a refusal naming MaxGroups", group.MaxGroups+1, rep.Status, rep.Data)
	}
	if n := len(p.groups.Stats()); n != group.MaxGroups {
		t.Fatalf("%d groups kept, want %d", n, group.MaxGroups)
	}
	if _, ok := p.groups.Stats()["s/one-too-many"]; ok {
		t.Fatal("the refused group is kept")
	}
	// An existing group is still served.
	if rep := call(&wire.Request{Op: wire.OpInfo, ID: 1, Stream: "s", Group: "g7", Member: "m/1"}); rep.Status != wire.StatusOK {
		t.Fatalf("info of an existing group: status %d %s", rep.Status, rep.Data)
	}
	p.close()
	if _, err := os.Stat(filepath.Join(dir, "groups", "s", "one-too-many.state")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused group has a state file: %v", err)
	}
	states, err := filepath.Glob(filepath.Join(dir, "groups", "s", "*.state"))
	if err != nil || len(states) != group.MaxGroups {
		t.Fatalf("%d state files in the groups' directory (%v), want %d", len(states), err, group.MaxGroups)
	}
}

// Seek moves a group's cursor: back, and the records are delivered anew
// (first deliveries; an ack of a lease from before is refused); forward,
// and the records before count as settled; by time; an unknown group is
// refused and not created.
func TestSeek(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 10)
	ctx := context.Background()
	ep := p.srv.Endpoints()[0]
	a := member(t, group.MemberConfig{Name: "a", Buffer: 1, MaxAckPending: 1}, p)
	var last *group.Message
	for i := 0; i < 5; i++ {
		msg, err := a.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i < 4 {
			if err := msg.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
		last = msg // offset 4: leased, not acknowledged
	}
	testutil.WaitFor(t, "floor 4", 0, func() bool { return p.groups.Stats()["s/g"].Floor == 4 })
	shutdown(t, a)

	st, err := group.Seek(ctx, ep, "s", "g", spool.AtOffset(2), socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Floor != 2 || st.Next != 2 || st.Pending != 0 || st.InFlight != 0 || st.Lag != 8 {
		t.Fatalf("after seek to 2: %+v", st)
	}
	// A lease from before the seek is gone: its ack is refused.
	call := rawCaller(t, p)
	rep := call(&wire.Request{Op: wire.OpAck, Stream: "s", Group: "g", Member: a.ID(), Entries: []wire.Entry{{Offset: last.Offset, Delivery: last.Delivery}}})
	if rep.Status != wire.StatusPartial || rep.Data[8] != group.RefusedUnknown {
		t.Fatalf("ack of a lease from before the seek: status %d %x", rep.Status, rep.Data)
	}
	b := member(t, group.MemberConfig{Name: "b", Buffer: 1}, p)
	for want := uint64(2); want < 5; want++ {
		msg, err := b.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Offset != want || msg.Delivery != 1 {
			t.Fatalf("after seek: offset %d delivery %d, want %d, 1", msg.Offset, msg.Delivery, want)
		}
		if err := msg.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	shutdown(t, b)

	// Forward: 5..7 skipped, not dead-lettered.
	st, err = group.Seek(ctx, ep, "s", "g", spool.AtOffset(8), socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Floor != 8 || st.Lag != 2 || st.DeadLetters != 0 || st.DeadLettered != 0 {
		t.Fatalf("after seek to 8: %+v", st)
	}
	// Beyond the end: held at the end.
	if st, err = group.Seek(ctx, ep, "s", "g", spool.AtOffset(1<<40), socket.Config{}); err != nil || st.Floor != 10 || st.Lag != 0 {
		t.Fatalf("seek beyond the end: %+v, %v", st, err)
	}
	// By time: long ago is the earliest record; the future is the end.
	if st, err = group.Seek(ctx, ep, "s", "g", spool.AtTime(time.Unix(1, 0)), socket.Config{}); err != nil || st.Floor != 0 || st.Lag != 10 {
		t.Fatalf("seek to 1970: %+v, %v", st, err)
	}
	if st, err = group.Seek(ctx, ep, "s", "g", spool.AtTime(time.Now().Add(time.Hour)), socket.Config{}); err != nil || st.Floor != 10 {
		t.Fatalf("seek to the future: %+v, %v", st, err)
	}
	if st, err = group.Seek(ctx, ep, "s", "g", spool.Earliest(), socket.Config{}); err != nil || st.Floor != 0 {
		t.Fatalf("seek to earliest: %+v, %v", st, err)
	}
	if st, err = group.Seek(ctx, ep, "s", "g", spool.Latest(), socket.Config{}); err != nil || st.Floor != 10 {
		t.Fatalf("seek to latest: %+v, %v", st, err)
	}
	// The moved cursor survives a restart (the seek was answered once
	// written).
	dir := p.dir
	p.close()
	p2 := newPublisher(t, dir)
	p2.open("s")
	p2.publish(t, "s", 1) // offset 10
	c := member(t, group.MemberConfig{Name: "c", Buffer: 1}, p2)
	msg, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Offset != 10 {
		t.Fatalf("after the restart: offset %d, want 10", msg.Offset)
	}
	var se *group.StatusError
	if _, err := group.Seek(ctx, p2.srv.Endpoints()[0], "s", "nosuch", spool.Earliest(), socket.Config{}); !errors.As(err, &se) || se.Status != group.StatusUnknown {
		t.Fatalf("seek of an unknown group: %v", err)
	}
	if _, ok := p2.groups.Stats()["s/nosuch"]; ok {
		t.Fatal("a seek created a group")
	}
}

// Stats count per group: in flight, lag in records and time, and the
// dead letters kept in the dead-letter stream.
func TestStatsLagAndDeadLetters(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 5)
	ctx := context.Background()
	m := member(t, group.MemberConfig{Name: "a", Buffer: 1, MaxAckPending: 2}, p)
	msg, err := m.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := msg.Term(ctx, "poison"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the dead letter", 0, func() bool { return p.groups.Stats()["s/g"].DeadLettered == 1 })
	st := p.groups.Stats()["s/g"]
	if st.Stream != "s" || st.Group != "g" || st.Lag != 4 || st.DeadLetters != 1 || st.LagTime <= 0 || st.InFlight < 1 || st.InFlight != st.Pending {
		t.Fatalf("stats: %+v", st)
	}
	if l := p.groups.List(); len(l) != 1 || l[0].Group != "g" {
		t.Fatalf("list: %+v", l)
	}
}

// A node running members advertises group.MemberService; when gossip
// reports it failed (or left), the publisher releases its members' leases
// on the event, without polling (MemberCheck is an hour here) and without
// waiting for AckWait (an hour too).
func TestGoneNodeReleasedOnEvent(t *testing.T) {
	for _, how := range []string{"failed", "left"} {
		t.Run(how, func(t *testing.T) {
			mesh := discoverytest.NewMesh()
			defer mesh.Close()
			pubNode, err := mesh.Join("pub")
			if err != nil {
				t.Fatal(err)
			}
			p := newPublisherWith(t, t.TempDir(), func(c *group.ServerConfig) {
				c.Watch, c.Members, c.MemberCheck = pubNode, pubNode, time.Hour
			})
			p.publish(t, "s", 6)
			victim, err := mesh.Join("victim")
			if err != nil {
				t.Fatal(err)
			}
			if err := victim.Advertise(group.MemberServiceOf("tcp://127.0.0.1:1")); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			cfg := group.MemberConfig{Name: "victim", AckWait: time.Hour, Buffer: 2, MaxAckPending: 3}
			a := member(t, cfg, p)
			if _, err := a.Next(ctx); err != nil {
				t.Fatal(err)
			}
			testutil.WaitFor(t, "the victim holding 3 leases", 0, func() bool { return p.groups.Stats()["s/g"].InFlight == 3 })
			a.Close()
			if how == "failed" {
				victim.Close()
			} else {
				victim.Leave(ctx)
			}
			testutil.WaitFor(t, "the victim's leases released", 30*time.Second, func() bool {
				st := p.groups.Stats()["s/g"]
				return st.InFlight == 0 && st.Released == 3
			})
			b := member(t, group.MemberConfig{Name: "b", Buffer: 1}, p)
			redelivered := 0
			for i := 0; i < 6; i++ {
				msg, err := b.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if msg.Delivery == 2 {
					redelivered++
				}
				if err := msg.Ack(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if redelivered != 3 {
				t.Fatalf("%d redelivered, want the victim's 3", redelivered)
			}
		})
	}
}

// Dead letters are listed with their headers; a replay gives them back to
// their group (issue 31, item 3: not to the stream, which every group
// reads), which gets the records again at their own offsets with their
// own headers; a second replay of the same range replays nothing and says
// so. List finds the group, after a restart too.
func TestDeadLettersReplayAndList(t *testing.T) {
	dir := t.TempDir()
	p := newPublisher(t, dir)
	l, err := p.open("s")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := l.Append(ctx, spool.Record{Value: []byte(fmt.Sprintf("v%d", i)), Headers: []spool.Header{{Key: "k", Value: []byte(fmt.Sprint(i))}}}); err != nil {
			t.Fatal(err)
		}
	}
	ep := p.srv.Endpoints()[0]
	var se *group.StatusError
	if _, err := group.DeadLetters(ctx, ep, "s", "g", 0, 10, socket.Config{}); !errors.As(err, &se) || se.Status != group.StatusUnknown {
		t.Fatalf("dead letters before any: %v", err)
	}
	m := member(t, group.MemberConfig{Name: "a", Buffer: 1}, p)
	for i := 0; i < 3; i++ {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Offset < 2 {
			err = msg.Term(ctx, fmt.Sprintf("bad %d", msg.Offset))
		} else {
			err = msg.Ack(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "two dead letters", 0, func() bool { return p.groups.Stats()["s/g"].DeadLettered == 2 })
	dls, err := group.DeadLetters(ctx, ep, "s", "g", 0, 10, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 2 {
		t.Fatalf("%d dead letters, want 2", len(dls))
	}
	for i, r := range dls {
		hs := map[string]string{}
		for _, h := range r.Headers {
			hs[h.Key] = string(h.Value)
		}
		if r.Offset != uint64(i) || string(r.Value) != fmt.Sprintf("v%d", i) || hs["k"] != fmt.Sprint(i) ||
			hs[group.HeaderDLQReason] != fmt.Sprintf("bad %d", i) || hs[group.HeaderDLQOffset] != fmt.Sprint(i) || hs[group.HeaderDLQStream] != "s" {
			t.Fatalf("dead letter %d: offset %d %q %v", i, r.Offset, r.Value, hs)
		}
	}
	if dls, err := group.DeadLetters(ctx, ep, "s", "g", 1, 10, socket.Config{}); err != nil || len(dls) != 1 || dls[0].Offset != 1 {
		t.Fatalf("dead letters from 1: %v %v", dls, err)
	}

	res, err := group.Replay(ctx, ep, "s", "g", 0, 0, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed != 2 || res.Skipped != 0 || res.From != 0 || res.To != 2 {
		t.Fatalf("replay: %+v", res)
	}
	if res, err = group.Replay(ctx, ep, "s", "g", 0, 0, socket.Config{}); err != nil || res.Replayed != 0 || res.Skipped != 2 {
		t.Fatalf("second replay: %+v, %v", res, err)
	}
	if l.NextOffset() != 3 {
		t.Fatalf("stream holds %d records after two replays, want its 3", l.NextOffset())
	}
	for want := uint64(0); want < 2; want++ {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hs := map[string]string{}
		for _, h := range msg.Headers {
			hs[h.Key] = string(h.Value)
		}
		if msg.Offset != want || string(msg.Value) != fmt.Sprintf("v%d", want) || hs["k"] != fmt.Sprint(want) || len(hs) != 1 {
			t.Fatalf("replayed record: offset %d %q headers %v", msg.Offset, msg.Value, hs)
		}
		if err := msg.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	shutdown(t, m)
	// The replay note survives a restart; List finds the group on disk.
	p.close()
	p2 := newPublisher(t, dir)
	p2.open("s")
	p2.open(group.DLQStream("s", "g"))
	ep = p2.srv.Endpoints()[0]
	if res, err = group.Replay(ctx, ep, "s", "g", 1, 5, socket.Config{}); err != nil || res.Replayed != 0 || res.Skipped != 1 || res.To != 2 {
		t.Fatalf("replay after the restart: %+v, %v", res, err)
	}
	ls, err := group.List(ctx, ep, group.AllStreams, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].Stream != "s" || ls[0].Group != "g" || ls[0].Floor != 3 || ls[0].DeadLettered != 2 {
		t.Fatalf("list: %+v", ls)
	}
	if ls, err = group.List(ctx, ep, "other", socket.Config{}); err != nil || len(ls) != 0 {
		t.Fatalf("list of another stream: %+v, %v", ls, err)
	}
}

// The operators' ops refuse bad names, and name unknown streams and
// groups as such, creating nothing.
func TestAdminBadInput(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 3)
	call := rawCaller(t, p)
	for _, c := range []struct {
		r    wire.Request
		want wire.Status
	}{
		{wire.Request{Op: wire.OpList, Stream: "../x", Group: "*", Member: "m"}, wire.StatusBadRequest},
		{wire.Request{Op: wire.OpDLQ, Stream: "s", Group: "../x", Member: "m"}, wire.StatusBadRequest},
		{wire.Request{Op: wire.OpReplay, Stream: "*", Group: "g", Member: "m"}, wire.StatusBadRequest},
		{wire.Request{Op: wire.OpDLQ, Stream: "s", Group: "nosuch", Member: "m"}, wire.StatusUnknown},
		{wire.Request{Op: wire.OpReplay, Stream: "s", Group: "nosuch", Member: "m"}, wire.StatusUnknown},
		{wire.Request{Op: wire.OpSeek, Stream: "nosuch", Group: "g", Member: "m"}, wire.StatusUnknown},
		{wire.Request{Op: wire.OpSeek, Stream: "s", Group: "nosuch", Member: "m"}, wire.StatusUnknown},
		{wire.Request{Op: wire.OpInfo, Stream: "s", Group: "nosuch", Member: "m"}, wire.StatusUnknown},
	} {
		if rep := call(&c.r); rep.Status != c.want {
			t.Errorf("op %d %s/%s: status %d %q, want %d", c.r.Op, c.r.Stream, c.r.Group, rep.Status, rep.Data, c.want)
		}
	}
	if rep := call(&wire.Request{Op: wire.OpList, Stream: group.AllStreams, Group: "*", Member: "m"}); rep.Status != wire.StatusOK || string(rep.Data) != "[]" {
		t.Fatalf("list of a publisher without groups: %d %q", rep.Status, rep.Data)
	}
	if n := len(p.groups.Stats()); n != 0 {
		t.Fatalf("%d groups after the refusals, want none", n)
	}
}

// An idempotently published record (message id and producer sequence) that
// fails every time is dead-lettered, and the group goes on: the dead-letter
// stream never saw the producer, so its sequence is not carried there. A
// replay gives it back to the group with its own id (it appends nothing,
// which the id would refuse as a duplicate).
func TestDeadLetterOfIdempotentRecord(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	l, err := p.open("s")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Append(ctx, spool.Record{Value: []byte("first"), Headers: []spool.Header{spool.MsgID("m-1"), spool.ProducerSeq("prod", 1)}},
		spool.Record{Value: []byte("poison"), Headers: []spool.Header{spool.MsgID("m-2"), spool.ProducerSeq("prod", 2)}}); err != nil {
		t.Fatal(err)
	}
	m := member(t, group.MemberConfig{MaxDeliver: 1, Buffer: 1}, p)
	msg, err := m.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := msg.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if msg, err = m.Next(ctx); err != nil || string(msg.Value) != "poison" {
		t.Fatalf("next: %v %v", msg, err)
	}
	if err := msg.Nak(ctx, 0); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the dead letter", 0, func() bool {
		dl, err := p.open(group.DLQStream("s", "g"))
		return err == nil && dl.NextOffset() == 1
	})
	// The group still commits: a record after it is acked.
	if _, err := l.Append(ctx, spool.Record{Value: []byte("fine")}); err != nil {
		t.Fatal(err)
	}
	msg, err = m.Next(ctx)
	if err != nil || string(msg.Value) != "fine" {
		t.Fatalf("next: %v %v", msg, err)
	}
	if err := msg.Ack(ctx); err != nil {
		t.Fatalf("ack after the dead letter: %v", err)
	}
	res, err := group.Replay(ctx, p.srv.Endpoints()[0], "s", "g", 0, 0, socket.Config{})
	if err != nil || res.Replayed != 1 {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	if l.NextOffset() != 3 {
		t.Fatalf("stream next %d after the replay, want 3", l.NextOffset())
	}
	if msg, err = m.Next(ctx); err != nil || string(msg.Value) != "poison" || msg.Offset != 1 {
		t.Fatalf("the replayed record: %+v %v", msg, err)
	}
	if len(msg.Headers) == 0 || msg.Headers[0].Key != spool.HeaderMsgID || string(msg.Headers[0].Value) != "m-2" {
		t.Fatalf("the replayed record's headers: %v, want its own id first", msg.Headers)
	}
}

// Floors reports what is on disk: a served group's floor once its acks are
// written, and for a group known only from disk its snapshot's floor,
// read without touching its files (the flusher may be appending to them).
func TestFloors(t *testing.T) {
	dir := t.TempDir()
	p := newPublisher(t, dir)
	p.publish(t, "s", 10)
	m := member(t, group.MemberConfig{}, p)
	ctx := context.Background()
	for range 10 {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := msg.Ack(ctx); err != nil { // answered once written
			t.Fatal(err)
		}
	}
	if f := p.groups.Floors("s"); f["g"] != 10 {
		t.Fatalf("served group: floors %v, want g at 10", f)
	}
	shutdown(t, m)
	p.close()
	files := func() map[string]int64 {
		out := map[string]int64{}
		ents, _ := os.ReadDir(filepath.Join(dir, "groups", "s"))
		for _, e := range ents {
			info, _ := e.Info()
			out[e.Name()] = info.Size()
		}
		return out
	}
	before := files()
	p2 := newPublisher(t, dir)
	f := p2.groups.Floors("s")
	if v, ok := f["g"]; !ok || v > 10 {
		t.Fatalf("group on disk: floors %v, want g at or below 10", f)
	}
	if after := files(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("Floors changed the group's files: %v -> %v", before, after)
	}
}

// A member keeps two fetches open at a publisher (FlagPipeline) and
// gets every record.
func TestMemberPipelinesFetches(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.open("s")
	m := member(t, group.MemberConfig{Name: "a"}, p)
	testutil.WaitFor(t, "two fetches open at the publisher", 0, func() bool { return p.groups.ParkedFetches("s", "g", m.ID()) == 2 })
	p.publish(t, "s", 50)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := map[string]bool{}
	for len(got) < 50 {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatalf("after %d records: %v", len(got), err)
		}
		k := fmt.Sprintf("%s/%d", msg.Publisher, msg.Offset)
		if got[k] {
			t.Fatalf("%s delivered twice", k)
		}
		got[k] = true
		if err := msg.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "two fetches open again", 0, func() bool { return p.groups.ParkedFetches("s", "g", m.ID()) == 2 })
}
