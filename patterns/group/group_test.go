package group_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		os.Exit(runCrashChild(dir))
	}
	if dir := os.Getenv(replayChildEnv); dir != "" {
		os.Exit(runReplayChild(dir))
	}
	goleak.VerifyTestMain(m)
}

// publisher is a spool server with a group server, as a node runs them.
type publisher struct {
	dir    string
	mu     sync.Mutex
	logs   map[string]*spool.Log
	srv    *pull.Server
	groups *group.Server
	// spoolCfg is the template of the streams' spools (Dir is set per
	// stream).
	spoolCfg spool.Config
}

func newPublisher(t testing.TB, dir string) *publisher {
	t.Helper()
	return newPublisherWith(t, dir, func(*group.ServerConfig) {})
}

func (p *publisher) open(stream string) (*spool.Log, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.logs[stream]; l != nil {
		return l, nil
	}
	cfg := p.spoolCfg
	cfg.Dir = filepath.Join(p.dir, "streams", stream)
	l, err := spool.Open(cfg)
	if err != nil {
		return nil, err
	}
	p.logs[stream] = l
	return l, nil
}

func (p *publisher) close() {
	p.srv.Close() // closes the group server too
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.logs {
		l.Close()
	}
	p.logs = map[string]*spool.Log{}
}

func (p *publisher) publish(t testing.TB, stream string, n int) {
	t.Helper()
	l, err := p.open(stream)
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]spool.Record, n)
	for i := range recs {
		recs[i].Value = []byte(fmt.Sprintf("r%d", i))
	}
	if _, err := l.Append(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
}

// publishers starts k publishers of stream s, each with records records
// appended.
func publishers(t testing.TB, k, records int) []*publisher {
	t.Helper()
	pubs := make([]*publisher, k)
	for i := range pubs {
		pubs[i] = newPublisher(t, t.TempDir())
		if _, err := pubs[i].open("s"); err != nil {
			t.Fatal(err)
		}
		if records > 0 {
			pubs[i].publish(t, "s", records)
		}
	}
	return pubs
}

func member(t testing.TB, cfg group.MemberConfig, pubs ...*publisher) *group.Member {
	t.Helper()
	cfg.Publishers = map[string]string{}
	for i, p := range pubs {
		cfg.Publishers[fmt.Sprintf("p%d", i)] = p.srv.Endpoints()[0]
	}
	if cfg.Stream == "" {
		cfg.Stream = "s"
	}
	if cfg.Group == "" {
		cfg.Group = "g"
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 200 * time.Millisecond
	}
	m, err := group.NewMember(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// shutdown has m leave its group gracefully (Shutdown): its publishers
// release its leases at once.
func shutdown(t testing.TB, m *group.Member) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Shutdown(ctx); err != nil {
		t.Fatalf("member shutdown: %v", err)
	}
}

type key struct {
	pub string
	off uint64
}

// Two publishers, three members: every record is acknowledged once.
func TestQueueAcrossPublishers(t *testing.T) {
	p0, p1 := newPublisher(t, t.TempDir()), newPublisher(t, t.TempDir())
	const n = 300
	p0.publish(t, "s", n)
	p1.publish(t, "s", n)
	var mu sync.Mutex
	seen := map[key]int{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		m := member(t, group.MemberConfig{Name: fmt.Sprintf("m%d", i)}, p0, p1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Run(ctx, 4, func(ctx context.Context, msg *group.Message) error {
				mu.Lock()
				seen[key{msg.Publisher, msg.Offset}]++
				mu.Unlock()
				return nil
			})
		}()
	}
	testutil.WaitFor(t, "every record acknowledged", 0, func() bool {
		s0, s1 := p0.groups.Stats()["s/g"], p1.groups.Stats()["s/g"]
		return s0.Acked == n && s1.Acked == n && s0.Floor == n && s1.Floor == n
	})
	cancel()
	wg.Wait()
	if len(seen) != 2*n {
		t.Fatalf("processed %d distinct records, want %d", len(seen), 2*n)
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("record %v processed %d times with no failure", k, c)
		}
	}
}

// A nak with a delay is not redelivered before the delay; MaxDeliver
// moves the record to the dead-letter stream with its headers.
func TestNakDelayAndDeadLetter(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 1)
	m := member(t, group.MemberConfig{MaxDeliver: 3}, p)
	ctx := context.Background()
	msg, err := m.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	naked := time.Now()
	if err := msg.Nak(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	msg2, err := m.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(naked); d < 300*time.Millisecond {
		t.Fatalf("redelivered after %v, before the nak's delay", d)
	}
	if msg2.Delivery != 2 || msg2.Offset != 0 {
		t.Fatalf("redelivery: offset %d delivery %d", msg2.Offset, msg2.Delivery)
	}
	if err := msg2.Ack(ctx); err != nil {
		// fine below: nak again instead
		t.Fatal(err)
	}
	if err := msg2.Ack(ctx); !errors.Is(err, group.ErrRefused) {
		t.Fatalf("second ack: %v, want refused", err)
	}

	p.publish(t, "s", 1) // offset 1: fails every time
	for i := 1; i <= 3; i++ {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Offset != 1 || msg.Delivery != uint32(i) {
			t.Fatalf("got offset %d delivery %d, want 1, %d", msg.Offset, msg.Delivery, i)
		}
		if err := msg.Nak(ctx, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	dlq := group.DLQStream("s", "g")
	testutil.WaitFor(t, "the dead letter", 0, func() bool {
		l, err := p.open(dlq)
		return err == nil && l.NextOffset() == 1
	})
	l, _ := p.open(dlq)
	rd, _ := l.NewReader(0)
	defer rd.Close()
	rec, err := rd.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{group.HeaderDLQStream: "s", group.HeaderDLQOffset: "1", group.HeaderDLQGroup: "g", group.HeaderDLQDeliveries: "3", group.HeaderDLQReason: "max deliveries"}
	for _, h := range rec.Headers {
		if w, ok := want[h.Key]; ok {
			if string(h.Value) != w {
				t.Errorf("header %s = %q, want %q", h.Key, h.Value, w)
			}
			delete(want, h.Key)
		}
	}
	if len(want) > 0 || string(rec.Value) != "r0" {
		t.Fatalf("dead letter %q lacks headers %v", rec.Value, want)
	}
}

// A member that vanishes without a word: only its leases are redelivered,
// after AckWait (no gossip here).
func TestAbandonedLeasesExpire(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 10)
	ctx := context.Background()
	a := member(t, group.MemberConfig{Name: "a", AckWait: 300 * time.Millisecond, Buffer: 2, MaxAckPending: 2}, p)
	held := map[uint64]bool{}
	for i := 0; i < 2; i++ {
		msg, err := a.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held[msg.Offset] = true
	}
	a.Close()
	b := member(t, group.MemberConfig{Name: "b"}, p)
	got := map[uint64]uint32{}
	for len(got) < 10 {
		msg, err := b.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got[msg.Offset] = msg.Delivery
		if err := msg.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for o, d := range got {
		if want := uint32(1); held[o] {
			want = 2
			if d != want {
				t.Errorf("offset %d: delivery %d, want %d", o, d, want)
			}
		} else if d != want {
			t.Errorf("offset %d: delivery %d, want %d", o, d, want)
		}
	}
}

// Closing a member releases its leases at once, and the group's state
// survives a publisher restart.
func TestLeaveAndRestart(t *testing.T) {
	dir := t.TempDir()
	p := newPublisher(t, dir)
	p.publish(t, "s", 5)
	ctx := context.Background()
	a := member(t, group.MemberConfig{Name: "a", Buffer: 1}, p)
	msg, err := a.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := msg.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Next(ctx); err != nil { // leased, not acked
		t.Fatal(err)
	}
	shutdown(t, a) // leave: released at once, though AckWait is 30 s
	b := member(t, group.MemberConfig{Name: "b", Buffer: 1}, p)
	msg, err = b.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Offset != 1 || msg.Delivery != 2 {
		t.Fatalf("after leave: offset %d delivery %d, want 1, 2", msg.Offset, msg.Delivery)
	}
	if err := msg.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	shutdown(t, b)
	p.close()
	p2 := newPublisher(t, dir)
	p2.open("s")
	c := member(t, group.MemberConfig{Name: "c", Buffer: 1}, p2)
	msg, err = c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Offset != 2 {
		t.Fatalf("after restart: offset %d, want 2 (0 and 1 were acknowledged)", msg.Offset)
	}
}

// Two groups on one stream each get every record.
func TestTwoGroups(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 20)
	ctx := context.Background()
	for _, g := range []string{"g1", "g2"} {
		m := member(t, group.MemberConfig{Group: g}, p)
		for i := 0; i < 20; i++ {
			msg, err := m.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := msg.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := p.groups.Stats()
	if st["s/g1"].Floor != 20 || st["s/g2"].Floor != 20 {
		t.Fatalf("stats %+v", st)
	}
	info, err := group.Info(ctx, p.srv.Endpoints()[0], "s", "g1", socket.Config{})
	if err != nil || info.Acked != 20 || info.High != 20 {
		t.Fatalf("info: %+v, %v", info, err)
	}
	var se *group.StatusError
	if _, err := group.Info(ctx, p.srv.Endpoints()[0], "s", "nosuch", socket.Config{}); !errors.As(err, &se) || se.Status != group.StatusUnknown {
		t.Fatalf("info of an unknown group: %v", err)
	}
}

// Bad input changes nothing: settles of leases the member does not hold,
// of another delivery, for unknown groups and streams, and malformed
// requests get clear refusals.
func TestBadInput(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 3)
	ctx := context.Background()
	a := member(t, group.MemberConfig{Name: "a", Buffer: 1}, p)
	msg, err := a.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := p.groups.Stats()["s/g"]
	p.groups.ShareMemberIDs() // a's id from the test's socket

	sock, err := socket.New(socket.Dealer, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	if err := sock.Connect(p.srv.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
	call := func(frames [][]byte) wire.Reply {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := sock.Send(cctx, socket.Msg{Frames: frames}); err != nil {
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
		return rep
	}
	settle := func(op wire.Op, stream, grp, mem string, e wire.Entry) wire.Reply {
		return call(wire.EncodeRequest(&wire.Request{Op: op, Stream: stream, Group: grp, Member: mem, Entries: []wire.Entry{e}}))
	}
	// Another member acks a's lease: refused, not its lease.
	if rep := settle(wire.OpAck, "s", "g", "b/x", wire.Entry{Offset: msg.Offset, Delivery: msg.Delivery}); rep.Status != wire.StatusPartial || rep.Data[8] != group.RefusedNotLeased {
		t.Fatalf("ack of another's lease: status %d data %x", rep.Status, rep.Data)
	}
	// a's own id, an older delivery: refused.
	if rep := settle(wire.OpAck, "s", "g", a.ID(), wire.Entry{Offset: msg.Offset, Delivery: msg.Delivery + 1}); rep.Status != wire.StatusPartial {
		t.Fatalf("ack of another delivery: status %d", rep.Status)
	}
	// An offset never leased.
	if rep := settle(wire.OpNak, "s", "g", a.ID(), wire.Entry{Offset: 2, Delivery: 1}); rep.Status != wire.StatusPartial || rep.Data[8] != group.RefusedUnknown {
		t.Fatalf("nak of an offset never leased: status %d data %x", rep.Status, rep.Data)
	}
	if rep := settle(wire.OpAck, "s", "nosuch", a.ID(), wire.Entry{Offset: 0, Delivery: 1}); rep.Status != wire.StatusUnknown {
		t.Fatalf("unknown group: status %d %s", rep.Status, rep.Data)
	}
	if rep := settle(wire.OpAck, "nosuch", "g", a.ID(), wire.Entry{Offset: 0, Delivery: 1}); rep.Status != wire.StatusUnknown {
		t.Fatalf("unknown stream: status %d %s", rep.Status, rep.Data)
	}
	bad := wire.EncodeRequest(&wire.Request{Op: wire.OpAck, Stream: "s", Group: "g", Member: "m", Entries: []wire.Entry{{Offset: 0, Delivery: 1}}})
	bad[4] = bad[4][:5]
	if rep := call(bad); rep.Status != wire.StatusBadRequest || !strings.Contains(string(rep.Data), "malformed") {
		t.Fatalf("malformed: status %d %s", rep.Status, rep.Data)
	}
	if rep := settle(wire.OpAck, "s", "../x", a.ID(), wire.Entry{Offset: 0, Delivery: 1}); rep.Status != wire.StatusBadRequest {
		t.Fatalf("bad group name: status %d %s", rep.Status, rep.Data)
	}
	after := p.groups.Stats()["s/g"]
	// (a's buffer may have leased one more record meanwhile.)
	if after.Acked != before.Acked || after.Naked != before.Naked || after.Floor != before.Floor || after.Available != 0 || after.DeadLetters != 0 {
		t.Fatalf("state changed: %+v -> %+v", before, after)
	}
	if err := msg.Ack(ctx); err != nil {
		t.Fatalf("the holder's ack after the refusals: %v", err)
	}
}

// An ordered group: records of one key are never in flight at two members
// at once and are processed in offset order, across a member that
// vanishes holding leases; different keys go in parallel.
func TestOrderedByKey(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	l, err := p.open("s")
	if err != nil {
		t.Fatal(err)
	}
	const perKey = 40
	keys := []string{"a", "b", "c"}
	var recs []spool.Record
	for i := 0; i < perKey; i++ {
		for _, k := range keys {
			recs = append(recs, spool.Record{Value: []byte(k), Headers: []spool.Header{group.Key(k)}})
		}
	}
	if _, err := l.Append(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := group.MemberConfig{Ordered: true, AckWait: 300 * time.Millisecond, Buffer: 4}
	// The victim takes the heads of some keys and vanishes.
	victim := member(t, cfg, p)
	held := map[uint64]bool{}
	for i := 0; i < 2; i++ {
		msg, err := victim.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held[msg.Offset] = true
	}
	victim.Close()

	var mu sync.Mutex
	inFlight := map[string]bool{}
	last := map[string]int64{"a": -1, "b": -1, "c": -1}
	done := 0
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		m := member(t, cfg, p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Run(runCtx, 4, func(ctx context.Context, msg *group.Message) error {
				k := string(msg.Value)
				mu.Lock()
				if inFlight[k] {
					t.Errorf("key %s: two records in flight at once", k)
				}
				if int64(msg.Offset) <= last[k] {
					t.Errorf("key %s: offset %d after %d", k, msg.Offset, last[k])
				}
				inFlight[k] = true
				mu.Unlock()
				runtime.Gosched() // let another handler of the key run, were there one
				mu.Lock()
				inFlight[k] = false
				last[k] = int64(msg.Offset)
				done++
				mu.Unlock()
				return nil
			})
		}()
	}
	testutil.WaitFor(t, "every record acknowledged", 0, func() bool { return p.groups.Stats()["s/g"].Floor == uint64(len(recs)) })
	cancel()
	wg.Wait()
	if done != len(recs) {
		t.Fatalf("processed %d records, want %d (each once)", done, len(recs))
	}
}

// InProgress keeps a record leased past AckWait.
func TestInProgressExtends(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 1)
	ctx := context.Background()
	m := member(t, group.MemberConfig{AckWait: 200 * time.Millisecond, Buffer: 1}, p)
	msg, err := m.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A heartbeat every 60 ms for three AckWaits (pacing, as a worker's
	// heartbeat is, not synchronisation).
	tick := time.NewTicker(60 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(600 * time.Millisecond); time.Now().Before(end); <-tick.C {
		if err := msg.InProgress(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := msg.Ack(ctx); err != nil {
		t.Fatalf("ack after %v of InProgress with a 200ms AckWait: %v", 600*time.Millisecond, err)
	}
	if st := p.groups.Stats()["s/g"]; st.Expired != 0 || st.Acked != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Run starts no handler once its context ended, though records wait in
// the member's buffer: a handler that cancels after the tenth record is
// called ten times.
func TestRunStopsAtCancel(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 50)
	m := member(t, group.MemberConfig{Name: "a", Buffer: 64}, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rctx, stop := context.WithCancel(ctx)
	calls := 0
	err := m.Run(rctx, 1, func(_ context.Context, msg *group.Message) error {
		if calls++; calls == 10 {
			stop()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || calls != 10 {
		t.Fatalf("Run: %v after %d handler calls, want context.Canceled after 10", err, calls)
	}
}
