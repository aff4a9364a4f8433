package pull_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq/discovery/discoverytest"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// warnings is a slog handler that keeps every warning and error as one
// line: the message, then its attributes (those added with With first).
type warnings struct {
	mu    *sync.Mutex
	lines *[]string
	attrs string
}

func newWarnings() warnings { return warnings{mu: new(sync.Mutex), lines: new([]string)} }

func (w warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w warnings) Handle(_ context.Context, r slog.Record) error {
	line := r.Message + w.attrs
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	w.mu.Lock()
	*w.lines = append(*w.lines, line)
	w.mu.Unlock()
	return nil
}

func (w warnings) WithAttrs(as []slog.Attr) slog.Handler {
	for _, a := range as {
		w.attrs += " " + a.String()
	}
	return w
}

func (w warnings) WithGroup(string) slog.Handler { return w }

// find returns the first line that holds every one of parts.
func (w warnings) find(parts ...string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
next:
	for _, l := range *w.lines {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue next
			}
		}
		return l, true
	}
	return "", false
}

// appendBatches appends n records, per records to an Append, so that each
// stored batch holds per records.
func appendBatches(t *testing.T, l *spool.Log, prefix string, from, n, per int) {
	t.Helper()
	for i := from; i < from+n; i += per {
		recs := make([]spool.Record, 0, per)
		for j := i; j < min(i+per, from+n); j++ {
			recs = append(recs, spool.Record{Value: []byte(fmt.Sprintf("%s-%d", prefix, j))})
		}
		if _, err := l.Append(context.Background(), recs...); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
}

// damagedBatch says where damageBatch flipped bytes.
type damagedBatch struct {
	segment, segments int   // index of the segment holding the batch, and how many there are
	pos               int64 // byte position of the batch in its segment
}

// damageBatch flips bytes in the payload of the stored batch whose base
// offset is base, in a closed spool directory. It walks the segments as
// package spool's format spec describes them: a 32-byte segment header,
// then batches, each with its length at byte 0 and base offset at byte 16.
func damageBatch(t *testing.T, dir string, base uint64) damagedBatch {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	for i, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for pos := 32; pos+48 <= len(data); {
			n := int(binary.LittleEndian.Uint32(data[pos:]))
			if n < 48 {
				break
			}
			if binary.LittleEndian.Uint64(data[pos+16:]) == base {
				for k := pos + 48; k < pos+58; k++ {
					data[k] ^= 0xA5
				}
				if err := os.WriteFile(name, data, 0o644); err != nil {
					t.Fatal(err)
				}
				return damagedBatch{segment: i, segments: len(names), pos: int64(pos)}
			}
			pos += n
		}
	}
	t.Fatalf("no batch with base offset %d in %s", base, dir)
	return damagedBatch{}
}

// damagedSpool writes 1000 records "prefix-N" in batches of 10 to a new
// spool, in segments of about 4 KiB, then damages the batch holding
// offsets 580..589 and reopens the spool. The damaged batch is neither the
// first of its segment nor in the last one: Open does not see it, and a
// fetch from the start of that segment gets valid records before it.
func damagedSpool(t *testing.T, prefix string) *spool.Log {
	t.Helper()
	cfg := spool.Config{Dir: t.TempDir(), SegmentBytes: 4096}
	l, err := spool.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	appendBatches(t, l, prefix, 0, 1000, 10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	d := damageBatch(t, cfg.Dir, 580)
	if d.segment == d.segments-1 || d.pos == 32 {
		t.Fatalf("damaged batch at byte %d of segment %d of %d; the test needs it inside a middle segment", d.pos, d.segment, d.segments)
	}
	return openSpool(t, cfg)
}

// discovered starts a consumer of stream "logs" that finds its publishers
// through the discoverytest fake, and advertises each server under its
// publisher name.
func discovered(t *testing.T, cfg pull.ConsumerConfig, servers map[string]*pull.Server) *pull.Consumer {
	t.Helper()
	mesh := discoverytest.NewMesh()
	t.Cleanup(func() { mesh.Close() })
	self, err := mesh.Join("consumer")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Stream, cfg.Discovery = "logs", self
	c := startConsumer(t, cfg)
	for name, srv := range servers {
		p, err := mesh.Join(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.AdvertiseSpool(srv.Endpoints()[0], []string{"logs"}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// expectRecords reads the records of publisher pub at the given offsets,
// in order, with the values appendBatches wrote, and acknowledges them.
func expectRecords(t *testing.T, c *pull.Consumer, pub, prefix string, offsets []uint64) {
	t.Helper()
	for _, want := range offsets {
		m := next(t, c)
		if m.Publisher != pub || m.Offset != want {
			t.Fatalf("got %s@%d, want %s@%d", m.Publisher, m.Offset, pub, want)
		}
		if v := fmt.Sprintf("%s-%d", prefix, want); string(m.Value) != v {
			t.Fatalf("%s@%d: value %q, want %q", pub, want, m.Value, v)
		}
		c.Ack(m)
	}
}

// span returns the offsets [from, to).
func span(from, to uint64) []uint64 {
	var s []uint64
	for o := from; o < to; o++ {
		s = append(s, o)
	}
	return s
}

// repairedSpool writes 1000 records "prefix-N" in batches of 10 to a new
// spool, damages the batch holding offsets 580..589, repairs the spool
// with spool.Repair, which removes that batch and leaves a gap, and opens
// it again.
func repairedSpool(t *testing.T, prefix string) *spool.Log {
	t.Helper()
	dir := t.TempDir()
	l, err := spool.Open(spool.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	appendBatches(t, l, prefix, 0, 1000, 10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	damageBatch(t, dir, 580)
	rep, err := spool.Repair(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Actions) != 1 || len(rep.Actions[0].Removed) != 1 ||
		rep.Actions[0].Removed[0].From != 580 || rep.Actions[0].Removed[0].To != 590 {
		t.Fatalf("repair report %+v: want offsets 580..589 removed", rep)
	}
	return openSpool(t, spool.Config{Dir: dir})
}

// TestConsumerCrossesRepairGap proves a consumer crosses the gap spool
// repair leaves where it removed a damaged batch: every remaining record
// arrives once, in order, the skipped offsets are counted, and the
// committed position passes the gap.
func TestConsumerCrossesRepairGap(t *testing.T) {
	l := repairedSpool(t, "g")
	srv := startServer(t, map[string]*spool.Log{"logs": l})
	remaining := append(span(0, 580), span(590, 1000)...)

	t.Run("from the start", func(t *testing.T) {
		store, err := spool.OpenOffsets(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		logs := newWarnings()
		c := discovered(t, pull.ConsumerConfig{Offsets: store, CommitInterval: -1, Logger: slog.New(logs)}, map[string]*pull.Server{"pa": srv})
		expectRecords(t, c, "pa", "g", remaining)
		st, _ := publisherStats(c, "pa")
		if st.GapsSkipped != 1 || st.RecordsSkipped != 10 || st.Stopped != nil {
			t.Fatalf("gaps %d, records skipped %d, stopped %v; want 1, 10, nil", st.GapsSkipped, st.RecordsSkipped, st.Stopped)
		}
		if line, ok := logs.find("skipped", "peer=pa", "stream=logs", "offset=580", "to=590"); !ok {
			t.Fatalf("no warning names the publisher, stream and range: %q", *logs.lines)
		} else {
			t.Log(line)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if got, ok := store.Get("pa", "logs"); !ok || got != 1000 {
			t.Fatalf("committed %d,%v; want 1000 past the gap", got, ok)
		}
	})
	t.Run("from inside the gap", func(t *testing.T) {
		c := discovered(t, pull.ConsumerConfig{Start: spool.AtOffset(585)}, map[string]*pull.Server{"pa": srv})
		expectRecords(t, c, "pa", "g", span(590, 1000))
		if st, _ := publisherStats(c, "pa"); st.GapsSkipped != 1 || st.RecordsSkipped != 5 {
			t.Fatalf("gaps %d, records skipped %d; want 1 and 5", st.GapsSkipped, st.RecordsSkipped)
		}
	})
	if st := srv.Stats(); st.Gaps != 2 || st.Damaged != 0 {
		t.Fatalf("server stats %+v: want 2 gap replies, no damage", st)
	}
}

// TestConsumerStopsAtUnrepairedDamage proves a consumer never skips data
// that is only unreadable on the publisher: it delivers every record
// before the damage, including those that came in the same reply as it,
// then Next reports the publisher stopped instead of hanging.
func TestConsumerStopsAtUnrepairedDamage(t *testing.T) {
	l := damagedSpool(t, "d")
	srv := startServer(t, map[string]*spool.Log{"logs": l})
	c := discovered(t, pull.ConsumerConfig{}, map[string]*pull.Server{"pa": srv})
	expectRecords(t, c, "pa", "d", span(0, 580))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Next(ctx)
	expectStopped(t, err, "pa", 580, pull.ErrDamaged)
	if c.Err() != err {
		t.Fatalf("Err is %v, want Next's %v", c.Err(), err)
	}
	if st, _ := publisherStats(c, "pa"); st.Stopped != err {
		t.Fatalf("stats say stopped with %v, want %v", st.Stopped, err)
	}
	if st := srv.Stats(); st.Damaged == 0 {
		t.Fatalf("server stats %+v: no damaged fetch counted", st)
	}
}

// expectStopped checks that err is a *FetchError of publisher pub of
// stream "logs" at offset off, caused by cause.
func expectStopped(t *testing.T, err error, pub string, off uint64, cause error) {
	t.Helper()
	var fe *pull.FetchError
	if !errors.As(err, &fe) {
		t.Fatalf("got %v, want a *pull.FetchError", err)
	}
	if fe.Publisher != pub || fe.Stream != "logs" || fe.Offset != off || !errors.Is(err, cause) {
		t.Fatalf("got %+v (%v), want publisher %s stream logs offset %d cause %v", fe, err, pub, off, cause)
	}
}

// fakePublisher serves the pull protocol from a raw ROUTER through handle,
// which returns the reply to a decoded request (nil: no reply). It
// returns the endpoint; the fake stops with the test.
func fakePublisher(t *testing.T, handle func(req pull.Request) *pull.Reply) string {
	t.Helper()
	r, err := socket.New(socket.Router, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := r.Bind("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := r.Recv(ctx)
			if err != nil {
				return
			}
			req, err := pull.DecodeRequest(m.Frames[1:])
			if err != nil {
				continue
			}
			if rep := handle(req); rep != nil {
				r.Send(ctx, socket.Msg{Frames: append(m.Frames[:1:1], pull.EncodeReply(rep)...)})
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		r.Close()
		<-done
	})
	return ep
}

// rawFrom answers requests from l the way a server that checks nothing
// would: stored batches as they are, damaged or not.
func rawFrom(l *spool.Log) func(req pull.Request) *pull.Reply {
	return func(req pull.Request) *pull.Reply {
		rep := &pull.Reply{Version: req.Version, ID: req.ID, Oldest: l.OldestOffset(), High: l.NextOffset()}
		if req.Op != pull.OpFetch {
			rep.Next = l.NextOffset()
			return rep
		}
		data, next, err := l.ReadRaw(req.Offset, int(req.MaxBytes))
		if err != nil {
			rep.Status, rep.Data = pull.StatusInternal, []byte(err.Error())
			return rep
		}
		rep.Next, rep.Data = max(next, req.Offset), data
		return rep
	}
}

// TestConsumerDeliversValidRecordsBeforeDamage proves the consumer's own
// check: a reply holding valid batches and then a damaged one (from a
// publisher that does not check what it sends) yields the valid records,
// and the damaged batch stops the publisher with ErrDamaged.
func TestConsumerDeliversValidRecordsBeforeDamage(t *testing.T) {
	l := damagedSpool(t, "v")
	ep := fakePublisher(t, rawFrom(l))
	c := startConsumer(t, pull.ConsumerConfig{Stream: "logs", Publishers: map[string]string{"pa": ep}})
	expectRecords(t, c, "pa", "v", span(0, 580))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Next(ctx)
	expectStopped(t, err, "pa", 580, pull.ErrDamaged)
	if !errors.Is(err, spool.ErrCorrupt) {
		t.Fatalf("error %v does not carry the spool's corruption error", err)
	}
}

// TestStoppedPublisherDoesNotStopTheOthers proves the rule Next follows
// with many publishers: the damaged one's records before the damage
// arrive, then its error, once; the healthy one's records keep coming,
// before and after it, and Err keeps the error.
func TestStoppedPublisherDoesNotStopTheOthers(t *testing.T) {
	la := damagedSpool(t, "a")
	lb := openSpool(t, spool.Config{})
	appendN(t, lb, "b", 0, 300)
	sa := startServer(t, map[string]*spool.Log{"logs": la})
	sb := startServer(t, map[string]*spool.Log{"logs": lb})
	c := discovered(t, pull.ConsumerConfig{}, map[string]*pull.Server{"pa": sa, "pb": sb})
	want := map[string]uint64{}
	prefix := map[string]string{"pa": "a", "pb": "b"}
	var stopped error
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for stopped == nil || want["pb"] < 300 {
		m, err := c.Next(ctx)
		if err != nil {
			if stopped != nil {
				t.Fatalf("second error %v after %v", err, stopped)
			}
			expectStopped(t, err, "pa", 580, pull.ErrDamaged)
			if want["pa"] != 580 {
				t.Fatalf("error after pa's record %d, want after all 580 before the damage", want["pa"])
			}
			stopped = err
			continue
		}
		if m.Offset != want[m.Publisher] || string(m.Value) != fmt.Sprintf("%s-%d", prefix[m.Publisher], m.Offset) {
			t.Fatalf("got %s@%d %q, want offset %d", m.Publisher, m.Offset, m.Value, want[m.Publisher])
		}
		want[m.Publisher]++
		c.Ack(m)
	}
	appendN(t, lb, "b", 300, 50)
	for i := 0; i < 50; i++ {
		m := next(t, c)
		if m.Publisher != "pb" || m.Offset != want["pb"] {
			t.Fatalf("after pa stopped: got %s@%d, want pb@%d", m.Publisher, m.Offset, want["pb"])
		}
		want["pb"]++
	}
	if c.Err() != stopped {
		t.Fatalf("Err %v, want %v", c.Err(), stopped)
	}
	testutil.WaitFor(t, "pa's fetcher to end", 0, func() bool {
		st, _ := publisherStats(c, "pa")
		return !st.Connected && st.Stopped == stopped
	})
}

// TestConsumerFallsBackToVersion1 points a consumer at a publisher that
// speaks only protocol version 1 and answers version 2 requests with a
// version 1 bad request: the consumer falls back and consumes.
func TestConsumerFallsBackToVersion1(t *testing.T) {
	l := openSpool(t, spool.Config{})
	appendBatches(t, l, "o", 0, 100, 10)
	serve := rawFrom(l)
	ep := fakePublisher(t, func(req pull.Request) *pull.Reply {
		if req.Version != 1 {
			return &pull.Reply{Version: 1, Status: pull.StatusBadRequest, Data: []byte("protocol version 2, want 1")}
		}
		return serve(req)
	})
	c := startConsumer(t, pull.ConsumerConfig{Stream: "logs", Publishers: map[string]string{"old": ep}})
	expectRecords(t, c, "old", "o", span(0, 100))
}

// TestServerAnswersVersion1WithoutNewStatuses checks that a version 1
// request at a gap gets what version 1 servers sent (the batches after
// it), and at damage an internal error, never the version 2 statuses.
func TestServerAnswersVersion1WithoutNewStatuses(t *testing.T) {
	srv := startServer(t, map[string]*spool.Log{"logs": damagedSpool(t, "s"), "gap": repairedSpool(t, "g")})
	d := rawDealer(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fetch := func(version uint8, stream string, off uint64) pull.Reply {
		t.Helper()
		req := pull.Request{Version: version, Op: pull.OpFetch, ID: 1, Offset: off, MaxBytes: 1 << 20, Stream: stream}
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
		if r.Version != version {
			t.Fatalf("reply in version %d to a version %d request", r.Version, version)
		}
		return r
	}
	if r := fetch(1, "logs", 580); r.Status != pull.StatusInternal || !strings.Contains(string(r.Data), "damaged") {
		t.Fatalf("version 1 fetch at the damage: %v %q", r.Status, r.Data)
	}
	if r := fetch(2, "logs", 580); r.Status != pull.StatusDamaged || r.Next != 580 {
		t.Fatalf("version 2 fetch at the damage: %v next %d %q", r.Status, r.Next, r.Data)
	}
	// Records before the damage come without it.
	if r := fetch(2, "logs", 575); r.Status != pull.StatusOK || r.Next != 580 {
		t.Fatalf("version 2 fetch before the damage: %v next %d", r.Status, r.Next)
	}
	if r := fetch(2, "gap", 583); r.Status != pull.StatusGap || r.Next != 590 || !strings.Contains(string(r.Data), "583 to 589") {
		t.Fatalf("version 2 fetch in the gap: %v next %d %q", r.Status, r.Next, r.Data)
	}
	r := fetch(1, "gap", 583)
	if r.Status != pull.StatusOK || r.Next != 1000 {
		t.Fatalf("version 1 fetch in the gap: %v next %d %q", r.Status, r.Next, r.Data)
	}
	first := uint64(0)
	if err := spool.DecodeBatches(r.Data, 0, 0, func(rec spool.Record) error {
		if first == 0 {
			first = rec.Offset
		}
		return nil
	}); err != nil || first != 590 {
		t.Fatalf("version 1 fetch in the gap: first record %d, %v; want 590", first, err)
	}
}

// TestConsumerStopsOnImpossibleGaps points a consumer at a publisher whose
// gap replies go nowhere (a gap ending at the requested offset): the
// consumer skips nothing and reports a protocol error.
func TestConsumerStopsOnImpossibleGaps(t *testing.T) {
	ep := fakePublisher(t, func(req pull.Request) *pull.Reply {
		if req.Op != pull.OpFetch {
			return &pull.Reply{Version: req.Version, ID: req.ID, High: 100}
		}
		return &pull.Reply{Version: req.Version, Status: pull.StatusGap, ID: req.ID, Next: req.Offset, High: 100}
	})
	c := startConsumer(t, pull.ConsumerConfig{Stream: "logs", Publishers: map[string]string{"pa": ep}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Next(ctx)
	expectStopped(t, err, "pa", 0, pull.ErrProtocol)
	if st, _ := publisherStats(c, "pa"); st.GapsSkipped != 0 || st.RecordsSkipped != 0 {
		t.Fatalf("skipped %d gaps, %d records on impossible gap replies", st.GapsSkipped, st.RecordsSkipped)
	}
}

// TestConsumerStopsWhenStartIsRefused points a consumer without a start
// offset at a publisher that refuses every request as bad: the consumer
// reports a protocol error instead of asking forever.
func TestConsumerStopsWhenStartIsRefused(t *testing.T) {
	ep := fakePublisher(t, func(req pull.Request) *pull.Reply {
		return &pull.Reply{Version: req.Version, Status: pull.StatusBadRequest, ID: req.ID, Data: []byte("no")}
	})
	c := startConsumer(t, pull.ConsumerConfig{Stream: "logs", Publishers: map[string]string{"pa": ep}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.Next(ctx)
	expectStopped(t, err, "pa", 0, pull.ErrProtocol)
}
