package pull_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openSpool(t *testing.T, cfg spool.Config) *spool.Log {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	l, err := spool.Open(cfg)
	if err != nil {
		t.Fatalf("open spool: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func appendN(t *testing.T, l *spool.Log, prefix string, from, n int) {
	t.Helper()
	recs := make([]spool.Record, 0, n)
	for i := from; i < from+n; i++ {
		recs = append(recs, spool.Record{Value: []byte(fmt.Sprintf("%s-%d", prefix, i))})
	}
	for len(recs) > 0 {
		k := min(len(recs), 500)
		if _, err := l.Append(context.Background(), recs[:k]...); err != nil {
			t.Fatalf("append: %v", err)
		}
		recs = recs[k:]
	}
}

func startServer(t *testing.T, streams map[string]*spool.Log) *pull.Server {
	t.Helper()
	s, err := pull.NewServer(pull.ServerConfig{
		Lookup: func(name string) (*spool.Log, bool) { l, ok := streams[name]; return l, ok },
	})
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func startConsumer(t *testing.T, cfg pull.ConsumerConfig) *pull.Consumer {
	t.Helper()
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	c, err := pull.NewConsumer(cfg)
	if err != nil {
		t.Fatalf("start consumer: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// next reads one message with a bounded wait.
func next(t *testing.T, c *pull.Consumer) pull.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := c.Next(ctx)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	return m
}

func TestConsumeEveryPublisherInOrder(t *testing.T) {
	const n = 3000
	a := openSpool(t, spool.Config{Codec: spool.CodecS2})
	b := openSpool(t, spool.Config{Codec: spool.CodecZstd})
	appendN(t, a, "a", 0, n)
	appendN(t, b, "b", 0, n)
	sa := startServer(t, map[string]*spool.Log{"logs": a})
	sb := startServer(t, map[string]*spool.Log{"logs": b})
	store, err := spool.OpenOffsets(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c := startConsumer(t, pull.ConsumerConfig{
		Stream:     "logs",
		Offsets:    store,
		Publishers: map[string]string{"pa": sa.Endpoints()[0], "pb": sb.Endpoints()[0]},
		MaxBytes:   16 << 10, // several fetches per publisher
	})
	nextOff := map[string]uint64{}
	for i := 0; i < 2*n; i++ {
		m := next(t, c)
		if m.Offset != nextOff[m.Publisher] {
			t.Fatalf("%s: got offset %d, want %d", m.Publisher, m.Offset, nextOff[m.Publisher])
		}
		want := fmt.Sprintf("%s-%d", strings.TrimPrefix(m.Publisher, "p"), m.Offset)
		if string(m.Value) != want {
			t.Fatalf("%s@%d: value %q, want %q", m.Publisher, m.Offset, m.Value, want)
		}
		if m.Stream != "logs" {
			t.Fatalf("stream %q", m.Stream)
		}
		nextOff[m.Publisher]++
		c.Ack(m)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	for _, p := range []string{"pa", "pb"} {
		if got, ok := store.Get(p, "logs"); !ok || got != n {
			t.Fatalf("committed %s = %d,%v; want %d", p, got, ok, n)
		}
	}
}

func TestConsumerResumesAfterLastCommit(t *testing.T) {
	l := openSpool(t, spool.Config{})
	appendN(t, l, "r", 0, 1000)
	srv := startServer(t, map[string]*spool.Log{"s": l})
	dir := t.TempDir()
	store, err := spool.OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := pull.ConsumerConfig{Stream: "s", Offsets: store, Publishers: map[string]string{"p": srv.Endpoints()[0]}, CommitInterval: -1}
	c := startConsumer(t, cfg)
	var last pull.Message
	for i := 0; i < 500; i++ {
		last = next(t, c)
		if i < 300 {
			c.Ack(last) // the first 300 are processed; 300..499 are not
		}
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	store.Close()

	store2, err := spool.OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store2.Close()
	cfg.Offsets = store2
	c2 := startConsumer(t, cfg)
	if m := next(t, c2); m.Offset != 300 {
		t.Fatalf("restarted consumer began at %d, want 300 (the first unacknowledged)", m.Offset)
	}
}

func TestOutOfOrderAcksCommitContiguousPrefix(t *testing.T) {
	l := openSpool(t, spool.Config{})
	appendN(t, l, "o", 0, 10)
	srv := startServer(t, map[string]*spool.Log{"s": l})
	store, err := spool.OpenOffsets(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c := startConsumer(t, pull.ConsumerConfig{Stream: "s", Offsets: store, Publishers: map[string]string{"p": srv.Endpoints()[0]}, CommitInterval: -1})
	msgs := make([]pull.Message, 10)
	for i := range msgs {
		msgs[i] = next(t, c)
	}
	for _, i := range []int{0, 1, 3, 4, 5} { // 2 missing
		c.Ack(msgs[i])
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.Get("p", "s"); got != 2 {
		t.Fatalf("committed %d, want 2", got)
	}
	c.Ack(msgs[2])
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.Get("p", "s"); got != 6 {
		t.Fatalf("committed %d, want 6", got)
	}
}

func TestLongPollDeliversNewRecords(t *testing.T) {
	l := openSpool(t, spool.Config{})
	srv := startServer(t, map[string]*spool.Log{"s": l})
	c := startConsumer(t, pull.ConsumerConfig{Stream: "s", Publishers: map[string]string{"p": srv.Endpoints()[0]}, MaxWait: 20 * time.Second})
	testutil.WaitFor(t, "a parked fetch", 0, func() bool { return srv.Stats().Parked > 0 })
	appendN(t, l, "late", 0, 1)
	m := next(t, c)
	if string(m.Value) != "late-0" || m.Offset != 0 {
		t.Fatalf("got %q@%d", m.Value, m.Offset)
	}
}

func TestStartPositions(t *testing.T) {
	l := openSpool(t, spool.Config{})
	appendN(t, l, "x", 0, 100)
	mid := time.Now()
	appendN(t, l, "y", 100, 50)
	srv := startServer(t, map[string]*spool.Log{"s": l})
	eps := map[string]string{"p": srv.Endpoints()[0]}
	cases := []struct {
		name  string
		start spool.Start
		want  uint64
	}{
		{"earliest", spool.Earliest(), 0},
		{"offset", spool.AtOffset(42), 42},
		{"time", spool.AtTime(mid), 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startConsumer(t, pull.ConsumerConfig{Stream: "s", Publishers: eps, Start: tc.start})
			if m := next(t, c); m.Offset != tc.want {
				t.Fatalf("started at %d, want %d", m.Offset, tc.want)
			}
		})
	}
	t.Run("latest", func(t *testing.T) {
		// A server of its own: parked fetches of the consumers above must
		// not satisfy the wait below.
		srv := startServer(t, map[string]*spool.Log{"s": l})
		eps := map[string]string{"p": srv.Endpoints()[0]}
		c := startConsumer(t, pull.ConsumerConfig{Stream: "s", Publishers: eps, Start: spool.Latest(), MaxWait: 20 * time.Second})
		testutil.WaitFor(t, "a parked fetch", 0, func() bool { return srv.Stats().Parked > 0 })
		appendN(t, l, "z", 150, 1)
		if m := next(t, c); m.Offset != 150 {
			t.Fatalf("latest started at %d, want 150", m.Offset)
		}
	})
}

func TestOutOfRangeMovesToOldest(t *testing.T) {
	l := openSpool(t, spool.Config{SegmentBytes: 4096, RetentionBytes: 8192})
	appendN(t, l, "old", 0, 2000)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	oldest := l.OldestOffset()
	if oldest == 0 {
		t.Fatal("retention removed nothing; the test needs a non-zero oldest offset")
	}
	srv := startServer(t, map[string]*spool.Log{"s": l})
	c := startConsumer(t, pull.ConsumerConfig{Stream: "s", Publishers: map[string]string{"p": srv.Endpoints()[0]}, Start: spool.AtOffset(0)})
	m := next(t, c)
	if m.Offset != oldest {
		t.Fatalf("first offset %d, want the oldest %d", m.Offset, oldest)
	}
	st := c.Stats()
	if len(st) != 1 || st[0].Resets != 1 || st[0].RecordsSkipped != oldest || st[0].GapsSkipped != 0 {
		t.Fatalf("stats %+v: want one out-of-range reset, %d records skipped below retention", st, oldest)
	}
	if srv.Stats().OutOfRange == 0 {
		t.Fatal("server did not count the out-of-range fetch")
	}
}

func TestOutOfRangeStopPolicy(t *testing.T) {
	l := openSpool(t, spool.Config{SegmentBytes: 4096, RetentionBytes: 8192})
	appendN(t, l, "old", 0, 2000)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, map[string]*spool.Log{"s": l})
	c := startConsumer(t, pull.ConsumerConfig{Stream: "s", Publishers: map[string]string{"p": srv.Endpoints()[0]}, Start: spool.AtOffset(0), OnOutOfRange: pull.StopPublisher})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Next(ctx)
	if !errors.Is(err, pull.ErrOutOfRange) || c.Err() != err {
		t.Fatalf("Next returned %v and Err %v; want the out-of-range error from both", err, c.Err())
	}
	if !strings.Contains(c.Err().Error(), "out of range (oldest") {
		t.Fatalf("error %q does not say the offset is out of range", c.Err())
	}
}

// TestServerSurvivesBadRequests sends malformed and unknown-stream requests
// from a raw DEALER and checks the replies and that the server still serves.
func TestServerSurvivesBadRequests(t *testing.T) {
	l := openSpool(t, spool.Config{})
	appendN(t, l, "ok", 0, 3)
	srv := startServer(t, map[string]*spool.Log{"s": l})
	d := rawDealer(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	roundTrip := func(frames ...[]byte) pull.Reply {
		t.Helper()
		if err := d.Send(ctx, socket.NewMsg(frames...)); err != nil {
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
	if r := roundTrip([]byte("garbage")); r.Status != pull.StatusBadRequest {
		t.Fatalf("garbage: status %v", r.Status)
	}
	if r := roundTrip(pull.EncodeRequest(&pull.Request{Op: pull.OpFetch, ID: 5, Stream: "nope"})...); r.Status != pull.StatusUnknown || r.ID != 5 {
		t.Fatalf("unknown stream: %+v", r)
	}
	r := roundTrip(pull.EncodeRequest(&pull.Request{Op: pull.OpFetch, ID: 6, Stream: "s", MaxBytes: 1 << 20})...)
	if r.Status != pull.StatusOK || r.Next != 3 || r.High != 3 {
		t.Fatalf("fetch after bad requests: %+v", r)
	}
	var got []string
	if err := spool.DecodeBatches(r.Data, 0, 0, func(rec spool.Record) error {
		got = append(got, string(rec.Value))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "ok-0,ok-1,ok-2" {
		t.Fatalf("records %v", got)
	}
	if st := srv.Stats(); st.BadRequests != 1 || st.UnknownStreams != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestOffsetBeyondEndResets covers a publisher whose spool was replaced by a
// shorter one: a consumer ahead of the log is reset instead of waiting
// forever.
func TestOffsetBeyondEndResets(t *testing.T) {
	l := openSpool(t, spool.Config{})
	appendN(t, l, "new", 0, 5)
	srv := startServer(t, map[string]*spool.Log{"s": l})
	c := startConsumer(t, pull.ConsumerConfig{Stream: "s", Publishers: map[string]string{"p": srv.Endpoints()[0]}, Start: spool.AtOffset(1000)})
	if m := next(t, c); m.Offset != 0 || string(m.Value) != "new-0" {
		t.Fatalf("got %q@%d, want new-0@0", m.Value, m.Offset)
	}
	if st := c.Stats(); st[0].Resets != 1 {
		t.Fatalf("resets %d, want 1", st[0].Resets)
	}
}

// TestConsumerSurvivesLyingPublisher points a consumer at a fake publisher
// whose replies claim impossible offsets and carry garbage: the consumer
// must not panic or deliver anything, and must report the publisher.
func TestConsumerSurvivesLyingPublisher(t *testing.T) {
	r, err := socket.New(socket.Router, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ep, err := r.Bind("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			m, err := r.Recv(ctx)
			if err != nil {
				return
			}
			req, err := pull.DecodeRequest(m.Frames[1:])
			if err != nil {
				continue
			}
			rep := pull.Reply{Status: pull.StatusOK, ID: req.ID, Next: 1 << 62, Oldest: 0, High: 1<<62 + 1, Data: []byte("not a batch at all")}
			if req.Op == pull.OpMeta {
				rep = pull.Reply{Status: pull.StatusOK, ID: req.ID, Next: 0, High: 10}
			} else if i%2 == 1 {
				rep.Next = 3 // a plausible header over garbage
			}
			r.Send(ctx, socket.Msg{Frames: append(m.Frames[:1:1], pull.EncodeReply(&rep)...)})
		}
	}()
	c := startConsumer(t, pull.ConsumerConfig{Stream: "s", Publishers: map[string]string{"liar": ep}})
	nctx, ncancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ncancel()
	m, err := c.Next(nctx)
	if err == nil {
		t.Fatalf("delivered %+v from a lying publisher", m)
	}
	// Garbage where batches belong is, as far as a consumer can tell,
	// damaged data.
	if !errors.Is(err, pull.ErrDamaged) || c.Err() != err {
		t.Fatalf("Next returned %v and Err %v; want the damage error from both", err, c.Err())
	}
	if !strings.Contains(c.Err().Error(), "bad replies") {
		t.Fatalf("error %q", c.Err())
	}
	c.Close()
	cancel()
	r.Close()
	<-done
}

// TestReplacedPublisherLog swaps a publisher's spool for a shorter one:
// the consumer resets to the new log, marks the first record Reset, and
// acknowledgements of records from the old log no longer count.
func TestReplacedPublisherLog(t *testing.T) {
	oldLog := openSpool(t, spool.Config{})
	appendN(t, oldLog, "old", 0, 200)
	newLog := openSpool(t, spool.Config{})
	appendN(t, newLog, "new", 0, 50)
	var cur atomic.Pointer[spool.Log]
	cur.Store(oldLog)
	srv, err := pull.NewServer(pull.ServerConfig{Lookup: func(string) (*spool.Log, bool) { return cur.Load(), true }})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := startConsumer(t, pull.ConsumerConfig{Stream: "s", Publishers: map[string]string{"p": srv.Endpoints()[0]}, MaxWait: 100 * time.Millisecond})
	var held []pull.Message
	for i := 0; i < 200; i++ {
		m := next(t, c)
		if i < 100 {
			c.Ack(m)
		} else {
			held = append(held, m)
		}
	}
	cur.Store(newLog) // the next fetch, after the parked one expires, finds the new log
	first := next(t, c)
	if first.Offset != 0 || string(first.Value) != "new-0" || !first.Reset {
		t.Fatalf("first after the swap: %q@%d reset=%v", first.Value, first.Offset, first.Reset)
	}
	for _, m := range held {
		c.Ack(m) // from the old log: must not move the new log's position
	}
	c.Ack(first)
	for i := 1; i < 50; i++ {
		m := next(t, c)
		if m.Reset {
			t.Fatalf("offset %d marked reset", m.Offset)
		}
		c.Ack(m)
	}
	if st := c.Stats(); st[0].Acked != 50 || st[0].Resets != 1 {
		t.Fatalf("acked %d resets %d, want 50 and 1", st[0].Acked, st[0].Resets)
	}
}

// TestSlowConsumerCostsNothingButDisk: a consumer that stops reading is
// sent no more than its buffer and one fetch in flight, however much the
// publisher has on disk.
func TestSlowConsumerCostsNothingButDisk(t *testing.T) {
	l := openSpool(t, spool.Config{})
	appendN(t, l, "backlog", 0, 50000) // ~1.5 MB stored
	srv := startServer(t, map[string]*spool.Log{"s": l})
	const maxBytes = 16 << 10
	c := startConsumer(t, pull.ConsumerConfig{Stream: "s", Publishers: map[string]string{"p": srv.Endpoints()[0]}, MaxBytes: maxBytes, Buffer: 1})
	next(t, c) // the consumer runs, then reads nothing more
	// Bound: the batch being read, one buffered, one held by the fetcher,
	// one reply in flight; each at most maxBytes plus one whole batch.
	const bound = 4 * (maxBytes + 8<<10)
	testutil.WaitFor(t, "the fetcher to fill its buffer", 0, func() bool { return srv.Stats().BytesServed > 2*maxBytes })
	for i := 0; i < 50; i++ {
		if served := srv.Stats().BytesServed; served > bound {
			t.Fatalf("served %d bytes to a consumer that stopped reading; bound %d", served, bound)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if total := l.Stats().Bytes; total < 10*bound {
		t.Fatalf("backlog of %d bytes is too small to tell", total)
	}
}

// rawDealer is a DEALER connected to srv, for tests that speak the wire
// protocol themselves; it is closed at the end of the test.
func rawDealer(t *testing.T, srv *pull.Server) *socket.Socket {
	t.Helper()
	d, err := socket.New(socket.Dealer, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.Connect(srv.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
	return d
}

// ServerConfig.Served is told of every record a reply carried, once it
// was handed to the socket, parked fetches included: each record the
// consumer got was reported served, in a range of its stream.
func TestServedReportsEveryRecordSent(t *testing.T) {
	l := openSpool(t, spool.Config{})
	appendN(t, l, "v", 0, 30)
	var mu sync.Mutex
	var seen []bool // by offset
	srv, err := pull.NewServer(pull.ServerConfig{
		Lookup: func(name string) (*spool.Log, bool) { return l, name == "s" },
		Served: func(stream string, from, next uint64) {
			mu.Lock()
			defer mu.Unlock()
			if stream != "s" || from >= next {
				t.Errorf("served %q [%d, %d)", stream, from, next)
			}
			for o := from; o < next; o++ {
				for uint64(len(seen)) <= o {
					seen = append(seen, false)
				}
				seen[o] = true
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c := startConsumer(t, pull.ConsumerConfig{Stream: "s", Publishers: map[string]string{"p": srv.Endpoints()[0]}, MaxWait: 20 * time.Second})
	for range 30 {
		next(t, c)
	}
	testutil.WaitFor(t, "a parked fetch", 0, func() bool { return srv.Stats().Parked > 0 })
	appendN(t, l, "late", 30, 1) // served from the parked fetch
	if m := next(t, c); m.Offset != 30 {
		t.Fatalf("got offset %d", m.Offset)
	}
	// Served runs after the reply is handed to the socket, so the
	// consumer may hold a record a moment before its report.
	testutil.WaitFor(t, "every delivered offset reported served", 0, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for o := range 31 {
			if o >= len(seen) || !seen[o] {
				return false
			}
		}
		return true
	})
}
