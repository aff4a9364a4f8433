package pull_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/discovery/discoverytest"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// swappableServer serves stream "logs" from whatever log cur holds.
func swappableServer(t *testing.T, cur *atomic.Pointer[spool.Log]) *pull.Server {
	t.Helper()
	srv, err := pull.NewServer(pull.ServerConfig{Lookup: func(s string) (*spool.Log, bool) {
		l := cur.Load()
		return l, s == "logs" && l != nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// expectNothingMore checks that no record arrives within a short while:
// what the test expected was all there was.
func expectNothingMore(t *testing.T, c *pull.Consumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	if m, err := c.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %s@%d %q (err %v), want nothing more", m.Publisher, m.Offset, m.Value, err)
	}
}

// TestConsumerAcrossCutTail proves a consumer never misses or silently
// re-reads records across a cut log tail (issue 13, item 3): a consumer
// committed at 1000; the publisher's last batch (990..999) is lost, by
// recovery of a damaged tail or by spool repair, and new records take
// offsets 990 on. The consumer gets every new record exactly once, from
// 990, and reports 990..999 as replaced, instead of missing 990..999 (20
// new records) or resetting to the oldest record (5 new records).
func TestConsumerAcrossCutTail(t *testing.T) {
	for _, how := range []string{"recovery", "repair"} {
		for _, added := range []int{20, 5} {
			t.Run(fmt.Sprintf("%s/%d new", how, added), func(t *testing.T) {
				dir := t.TempDir()
				l, err := spool.Open(spool.Config{Dir: dir})
				if err != nil {
					t.Fatal(err)
				}
				appendBatches(t, l, "old", 0, 1000, 10)
				var cur atomic.Pointer[spool.Log]
				cur.Store(l)
				srv := swappableServer(t, &cur)
				store, err := spool.OpenOffsets(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				defer store.Close()
				cfg := pull.ConsumerConfig{Stream: "logs", Publishers: map[string]string{"p": srv.Endpoints()[0]}, Offsets: store, CommitInterval: -1}
				c := startConsumer(t, cfg)
				expectRecords(t, c, "p", "old", span(0, 1000))
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				if p, ok := store.Position("p", "logs"); !ok || p != (spool.Position{Next: 1000, ID: l.ID(), Epoch: 0}) {
					t.Fatalf("committed %+v, want 1000 in epoch 0 of log %s", p, l.ID())
				}

				cur.Store(nil)
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				damageBatch(t, dir, 990)
				if how == "repair" {
					if _, err := spool.Repair(dir, nil); err != nil {
						t.Fatal(err)
					}
				}
				l2 := openSpool(t, spool.Config{Dir: dir})
				if e, start := l2.Epoch(); l2.NextOffset() != 990 || e == 0 || start != 990 {
					t.Fatalf("reopened log: next %d, epoch %d from %d; want a new epoch at 990", l2.NextOffset(), e, start)
				}
				appendBatches(t, l2, "new", 990, added, 5)
				cur.Store(l2)

				logs := newWarnings()
				cfg.Logger = slog.New(logs)
				c = startConsumer(t, cfg)
				for i, o := range span(990, 990+uint64(added)) {
					m := next(t, c)
					if m.Offset != o || string(m.Value) != fmt.Sprintf("new-%d", o) {
						t.Fatalf("got %q@%d, want new-%d@%d", m.Value, m.Offset, o, o)
					}
					if m.Reset != (i == 0) {
						t.Fatalf("offset %d: Reset %v", o, m.Reset)
					}
					if e, _ := l2.Epoch(); m.LogID != l2.ID() || m.Epoch != e {
						t.Fatalf("offset %d: log %s epoch %d, want %s epoch %d", o, m.LogID, m.Epoch, l2.ID(), e)
					}
					c.Ack(m)
				}
				expectNothingMore(t, c)
				st, _ := publisherStats(c, "p")
				if st.Diverged != 1 || st.RecordsReplaced != 10 || st.OtherLogs != 0 || st.Stopped != nil {
					t.Fatalf("stats %+v: want one divergence replacing 10 records", st)
				}
				if _, ok := logs.find("lost", "peer=p", "offset=990", "to=1000", "records=10"); !ok {
					t.Fatalf("no warning names the replaced range 990..999: %q", *logs.lines)
				}
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				e, _ := l2.Epoch()
				if p, _ := store.Position("p", "logs"); p != (spool.Position{Next: 990 + uint64(added), ID: l2.ID(), Epoch: e}) {
					t.Fatalf("committed %+v, want %d in epoch %d", p, 990+added, e)
				}
				if st := srv.Stats(); st.Diverged != 1 || st.OutOfRange != 0 {
					t.Fatalf("server stats %+v: want one diverged fetch, none out of range", st)
				}
			})
		}
	}
}

// TestConsumerNeverContinuesAnotherLog proves a consumer never takes
// another log's records for the offsets it had read (issue 13, item 7): its
// position on publisher "p" is in log A; a publisher named "p" now serves
// log B, longer. The consumer does not continue at its offset on B: it
// starts over by its Start policy, marks the first record Reset with B's
// identity, reports it, and commits positions in B.
func TestConsumerNeverContinuesAnotherLog(t *testing.T) {
	a := openSpool(t, spool.Config{})
	appendN(t, a, "a", 0, 100)
	b := openSpool(t, spool.Config{})
	appendN(t, b, "b", 0, 300)
	store, err := spool.OpenOffsets(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srvA := startServer(t, map[string]*spool.Log{"logs": a})
	cfg := pull.ConsumerConfig{Stream: "logs", Publishers: map[string]string{"p": srvA.Endpoints()[0]}, Offsets: store, CommitInterval: -1}
	c := startConsumer(t, cfg)
	expectRecords(t, c, "p", "a", span(0, 100))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	srvA.Close()

	srvB := startServer(t, map[string]*spool.Log{"logs": b})
	logs := newWarnings()
	cfg.Publishers = map[string]string{"p": srvB.Endpoints()[0]}
	cfg.Logger = slog.New(logs)
	c = startConsumer(t, cfg)
	first := next(t, c)
	if first.Offset != 0 || string(first.Value) != "b-0" || !first.Reset || first.LogID != b.ID() {
		t.Fatalf("first record from the other log: %q@%d reset=%v log %s; want b-0@0, reset, log %s", first.Value, first.Offset, first.Reset, first.LogID, b.ID())
	}
	c.Ack(first)
	expectRecords(t, c, "p", "b", span(1, 300))
	st, _ := publisherStats(c, "p")
	if st.OtherLogs != 1 || st.Resets != 1 || st.LogID != b.ID() {
		t.Fatalf("stats %+v: want one other log, log %s", st, b.ID())
	}
	if _, ok := logs.find("another log", "peer=p", "offset=100", "log="+a.ID().String(), "now="+b.ID().String()); !ok {
		t.Fatalf("no warning names the two logs: %q", *logs.lines)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if p, _ := store.Position("p", "logs"); p != (spool.Position{Next: 300, ID: b.ID()}) {
		t.Fatalf("committed %+v, want 300 in log %s", p, b.ID())
	}
	if st := srvB.Stats(); st.OtherLog != 1 {
		t.Fatalf("server stats %+v: want one fetch of another log refused", st)
	}
}

// TestLegacyPositionCheckedAgainstEpochZero: a position committed without
// a log identity (an offsets file of version 1) is taken as one of epoch
// 0, so a cut tail below it is still found.
func TestLegacyPositionCheckedAgainstEpochZero(t *testing.T) {
	dir := t.TempDir()
	l, err := spool.Open(spool.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	appendBatches(t, l, "old", 0, 100, 10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	damageBatch(t, dir, 90)
	l2 := openSpool(t, spool.Config{Dir: dir})
	appendBatches(t, l2, "new", 90, 20, 10)
	srv := startServer(t, map[string]*spool.Log{"logs": l2})
	store, err := spool.OpenOffsets(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Commit("p", "logs", 100); err != nil {
		t.Fatal(err)
	}
	c := startConsumer(t, pull.ConsumerConfig{Stream: "logs", Publishers: map[string]string{"p": srv.Endpoints()[0]}, Offsets: store})
	expectRecords(t, c, "p", "new", span(90, 110))
	if st, _ := publisherStats(c, "p"); st.Diverged != 1 || st.RecordsReplaced != 10 {
		t.Fatalf("stats %+v: want one divergence replacing 10 records", st)
	}
}

// TestImpostorAfterPublisherDied is item 7's attack through discovery: the
// publisher "p" dies, and another process (another identity, another log)
// takes its name. The consumer reports the new identity, never delivers
// the impostor's records as the offsets it had read, and starts over on
// the new log by its Start policy.
func TestImpostorAfterPublisherDied(t *testing.T) {
	genuine := openSpool(t, spool.Config{})
	appendN(t, genuine, "real", 0, 100)
	fake := openSpool(t, spool.Config{})
	appendN(t, fake, "fake", 0, 200)
	srvReal := startServer(t, map[string]*spool.Log{"logs": genuine})
	srvFake := startServer(t, map[string]*spool.Log{"logs": fake})

	mesh := discoverytest.NewMesh()
	t.Cleanup(func() { mesh.Close() })
	self, err := mesh.Join("consumer")
	if err != nil {
		t.Fatal(err)
	}
	p, err := mesh.Join("p")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AdvertiseSpool(srvReal.Endpoints()[0], []string{"logs"}); err != nil {
		t.Fatal(err)
	}
	logs := newWarnings()
	c := startConsumer(t, pull.ConsumerConfig{Stream: "logs", Discovery: self, Logger: slog.New(logs)})
	expectRecords(t, c, "p", "real", span(0, 100))
	p.Close()
	testutil.WaitFor(t, "publisher gone", 0, func() bool { st, _ := publisherStats(c, "p"); return !st.Connected })

	impostor, err := mesh.JoinIdentity("p", discovery.NewIdentity())
	if err != nil {
		t.Fatal(err)
	}
	if err := impostor.AdvertiseSpool(srvFake.Endpoints()[0], []string{"logs"}); err != nil {
		t.Fatal(err)
	}
	m := next(t, c)
	if m.Offset != 0 || string(m.Value) != "fake-0" || !m.Reset || m.LogID != fake.ID() {
		t.Fatalf("first record under the taken name: %q@%d reset=%v log %s; want fake-0@0, reset, log %s", m.Value, m.Offset, m.Reset, m.LogID, fake.ID())
	}
	st, _ := publisherStats(c, "p")
	if st.OtherLogs != 1 || st.Identity != impostor.Identity() {
		t.Fatalf("stats %+v: want one other log, identity %s", st, impostor.Identity())
	}
	if _, ok := logs.find("another node identity", "peer=p", "identity="+impostor.Identity()); !ok {
		t.Fatalf("no warning about the new identity: %q", *logs.lines)
	}
}

// TestRepliesEndAtEpochBoundaries: a reply never mixes two epochs, so
// every record carries the epoch it was written in, and a consumer that
// crosses a boundary (here at 990, after recovery cut a damaged tail)
// commits the new epoch.
func TestRepliesEndAtEpochBoundaries(t *testing.T) {
	dir := t.TempDir()
	l, err := spool.Open(spool.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	appendBatches(t, l, "v", 0, 1000, 10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	damageBatch(t, dir, 990)
	l2 := openSpool(t, spool.Config{Dir: dir})
	appendBatches(t, l2, "v", 990, 20, 10)
	e, start := l2.Epoch()
	srv := startServer(t, map[string]*spool.Log{"logs": l2})
	store, err := spool.OpenOffsets(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c := startConsumer(t, pull.ConsumerConfig{Stream: "logs", Publishers: map[string]string{"p": srv.Endpoints()[0]}, Start: spool.AtOffset(500), Offsets: store, CommitInterval: -1, MaxBytes: 64 << 10})
	for o := uint64(500); o < 1010; o++ {
		m := next(t, c)
		want := uint32(0)
		if o >= start {
			want = e
		}
		if m.Offset != o || m.Epoch != want || m.LogID != l2.ID() {
			t.Fatalf("record %d in epoch %d of %s; want %d in epoch %d of %s", m.Offset, m.Epoch, m.LogID, o, want, l2.ID())
		}
		c.Ack(m)
		if o == start-1 {
			if err := c.Commit(); err != nil {
				t.Fatal(err)
			}
			if p, _ := store.Position("p", "logs"); p != (spool.Position{Next: start, ID: l2.ID()}) {
				t.Fatalf("committed %+v at the boundary, want %d in epoch 0", p, start)
			}
		}
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if p, _ := store.Position("p", "logs"); p != (spool.Position{Next: 1010, ID: l2.ID(), Epoch: e}) {
		t.Fatalf("committed %+v, want 1010 in epoch %d", p, e)
	}
}

// TestServerPositionCheck sends raw fetches to a server whose log lost
// its tail (epoch 1 starts at 990 and holds 990..1009): version 2 fetches
// get the check (another log, diverged, served in the right epoch) and
// version 1 fetches are served as version 1 servers served them.
func TestServerPositionCheck(t *testing.T) {
	dir := t.TempDir()
	l, err := spool.Open(spool.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	appendBatches(t, l, "old", 0, 1000, 10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	damageBatch(t, dir, 990)
	l2 := openSpool(t, spool.Config{Dir: dir})
	appendBatches(t, l2, "new", 990, 20, 10)
	e, _ := l2.Epoch()
	srv := startServer(t, map[string]*spool.Log{"logs": l2})
	d := rawDealer(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fetch := func(req pull.Request) pull.Reply {
		t.Helper()
		req.Op, req.ID, req.MaxBytes, req.Stream = pull.OpFetch, 1, 1<<20, "logs"
		if err := d.Send(ctx, socket.Msg{Frames: pull.EncodeRequest(&req)}); err != nil {
			t.Fatal(err)
		}
		m, err := d.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r, err := pull.DecodeReply(m.Frames)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	id := l2.ID()
	for _, tc := range []struct {
		name   string
		req    pull.Request
		status pull.Status
		next   uint64
		epoch  uint32
	}{
		{"another id", pull.Request{Version: 2, Offset: 500, LogID: uuid.New(), Epoch: 0}, pull.StatusOtherLog, 500, e},
		{"an epoch never reached", pull.Request{Version: 2, Offset: 500, LogID: id, Epoch: e + 1}, pull.StatusOtherLog, 500, e},
		{"past the end of its epoch", pull.Request{Version: 2, Offset: 1000, LogID: id, Epoch: 0}, pull.StatusDiverged, 990, 0},
		{"past the end, no id", pull.Request{Version: 2, Offset: 995, Epoch: 0}, pull.StatusDiverged, 990, 0},
		{"within its epoch", pull.Request{Version: 2, Offset: 980, LogID: id, Epoch: 0}, pull.StatusOK, 990, 0},
		{"at the end of its epoch", pull.Request{Version: 2, Offset: 990, LogID: id, Epoch: 0}, pull.StatusOK, 1010, e},
		{"unchecked", pull.Request{Version: 2, Offset: 1000, Epoch: pull.NoEpoch}, pull.StatusOK, 1010, e},
		{"version 1", pull.Request{Version: 1, Offset: 1000}, pull.StatusOK, 1010, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fetch(tc.req)
			wantID := id
			if tc.req.Version == 1 {
				wantID = uuid.Nil
			}
			if r.Status != tc.status || r.Next != tc.next || r.Epoch != tc.epoch || r.LogID != wantID || r.Version != tc.req.Version {
				t.Fatalf("got v%d %v next %d epoch %d log %s (%q); want v%d %v next %d epoch %d log %s",
					r.Version, r.Status, r.Next, r.Epoch, r.LogID, r.Data, tc.req.Version, tc.status, tc.next, tc.epoch, wantID)
			}
		})
	}
	if st := srv.Stats(); st.OtherLog != 2 || st.Diverged != 2 {
		t.Fatalf("server stats %+v: want 2 other-log and 2 diverged fetches", st)
	}
}
