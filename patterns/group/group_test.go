package group_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
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

// A delayed record is not leased before its time and does not hold up
// the records behind it.
func TestDelayedDelivery(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	l, err := p.open("s")
	if err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(400 * time.Millisecond)
	if _, err := l.Append(context.Background(),
		spool.Record{Value: []byte("later"), Headers: []spool.Header{group.NotBefore(due)}},
		spool.Record{Value: []byte("now")}); err != nil {
		t.Fatal(err)
	}
	// A fetch waits a minute at the publisher: a delayed record that only
	// the next fetch would find comes far too late for ctx.
	m := member(t, group.MemberConfig{MaxWait: time.Minute}, p)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msg, err := m.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Value) != "now" {
		t.Fatalf("first record %q, want the one behind the delayed record", msg.Value)
	}
	msg.Ack(ctx)
	msg, err = m.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Value) != "later" || time.Now().Before(due) {
		t.Fatalf("got %q at %v, due %v", msg.Value, time.Now(), due)
	}
	if msg.Delivery != 1 {
		t.Fatalf("delayed record: delivery %d, want 1", msg.Delivery)
	}
	msg.Ack(ctx)

	// Appended while the member's fetch waits at the publisher: leased
	// when due, not when that fetch ends.
	got := make(chan *group.Message, 1)
	go func() {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- msg
	}()
	time.Sleep(100 * time.Millisecond) // let the fetch park
	due = time.Now().Add(300 * time.Millisecond)
	if _, err := l.Append(context.Background(),
		spool.Record{Value: []byte("parked"), Headers: []spool.Header{group.NotBefore(due)}}); err != nil {
		t.Fatal(err)
	}
	msg = <-got
	if msg == nil {
		return
	}
	if string(msg.Value) != "parked" || time.Now().Before(due) {
		t.Fatalf("got %q at %v, due %v", msg.Value, time.Now(), due)
	}
	msg.Ack(ctx)
}

// copyDir copies a live publisher's directory (or part), as a crash
// leaves it: the files as they are on disk at that moment; a file that
// goes while it walks (a temporary file renamed) is skipped.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The crash rule: after a publisher crash, no record whose ack was
// confirmed is redelivered; the records leased and unconfirmed at the
// crash come back.
func TestCrashRedeliversOnlyInFlight(t *testing.T) {
	dir := t.TempDir()
	p := newPublisher(t, dir)
	p.publish(t, "s", 100)
	ctx := context.Background()
	m := member(t, group.MemberConfig{Name: "a", Buffer: 8}, p)
	acked := map[uint64]bool{}
	leased := map[uint64]bool{}
	for i := 0; i < 60; i++ {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leased[msg.Offset] = true
		if i%3 != 2 { // two of three acked, confirmed
			if err := msg.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			acked[msg.Offset] = true
		}
	}
	crash := filepath.Join(t.TempDir(), "crash")
	copyDir(t, dir, crash) // the disk at the crash; the publisher never closed
	m.Close()

	p2 := newPublisher(t, crash)
	p2.open("s")
	m2 := member(t, group.MemberConfig{Name: "b"}, p2)
	got := map[uint64]bool{}
	for len(got)+len(acked) < 100 {
		msg, err := m2.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if acked[msg.Offset] {
			t.Fatalf("offset %d redelivered after the crash though its ack was confirmed", msg.Offset)
		}
		if got[msg.Offset] {
			t.Fatalf("offset %d delivered twice after the crash", msg.Offset)
		}
		if leased[msg.Offset] && msg.Delivery != 2 {
			t.Fatalf("offset %d, leased once before the crash, came back as delivery %d, want 2", msg.Offset, msg.Delivery)
		}
		got[msg.Offset] = true
		if err := msg.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for o := range leased {
		if !acked[o] && !got[o] {
			t.Errorf("offset %d, leased and not acked at the crash, was not redelivered", o)
		}
	}
	testutil.WaitFor(t, "the group's floor at the end", 0, func() bool { return p2.groups.Stats()["s/g"].Floor == 100 })
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

// TestParkedFetchesBounded: a member that keeps fetching at an empty
// stream without waiting for the replies holds one parked fetch; each
// newer fetch answers the one it replaces, empty, at once.
func TestParkedFetchesBounded(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	if _, err := p.open("empty"); err != nil {
		t.Fatal(err)
	}
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
	const fetches = 5
	for i := range fetches {
		req := wire.EncodeRequest(&wire.Request{Op: wire.OpFetch, ID: uint32(i + 1), Stream: "empty", Group: "g", Member: "m",
			MaxRecords: 10, WaitMillis: 60_000})
		if err := sock.Send(ctx, socket.Msg{Frames: req}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < fetches; i++ { // the replaced ones, answered empty, oldest first
		m, err := sock.Recv(ctx)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		rep, err := wire.DecodeReply(m.Frames, false)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Status != wire.StatusOK || rep.ID != uint32(i) || len(rep.Records) != 0 {
			t.Fatalf("reply %d: status %d id %d, %d records", i, rep.Status, rep.ID, len(rep.Records))
		}
	}
	short, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel2()
	if m, err := sock.Recv(short); err == nil {
		t.Fatalf("the newest fetch was answered although nothing arrived: %q", m.Frames)
	}
}

// A publisher with nothing to lease does not starve the others: a
// member's fetch waiting there holds buffer slots until its MaxWait ends,
// then those slots go to the fetch loops waiting for them in turn, so a
// publisher that has records gets some. (Slots taken back at once by the
// idle publisher's next fetch kept the records of the other from the
// member for ever.)
func TestIdlePublisherDoesNotStarveOthers(t *testing.T) {
	pubs := publishers(t, 2, 0)
	idle, busy := pubs[0], pubs[1]
	m := member(t, group.MemberConfig{Name: "a", Buffer: 4, MaxWait: 500 * time.Millisecond}, idle, busy)
	testutil.WaitFor(t, "a fetch waiting at the idle publisher", 30*time.Second, func() bool {
		_, ok := idle.groups.Counters("s", "g")
		return ok
	})
	busy.publish(t, "s", 20)
	nextAck(t, m, 20)
}

// A member with fewer buffer slots than fetch loops still fetches from
// every publisher while Next waits (each link's reserve slot): with a
// Buffer of 1 and two publishers, or the default Buffer with three,
// records appended at any one are delivered while fetches wait at the
// idle ones, which never end here (MaxWait of an hour). Without the
// reserve, the slots sat in fetches at the idle publishers and the
// records waited for them to end.
func TestFewSlotsManyPublishers(t *testing.T) {
	for _, tc := range []struct{ buffer, pubs int }{{1, 2}, {0, 3}} {
		t.Run(fmt.Sprintf("buffer%d-pubs%d", tc.buffer, tc.pubs), func(t *testing.T) {
			pubs := publishers(t, tc.pubs, 0)
			m := member(t, group.MemberConfig{Name: "a", Buffer: tc.buffer, MaxWait: time.Hour}, pubs...)
			// Each publisher in turn gets records while the others idle.
			for _, p := range pubs {
				p.publish(t, "s", 3)
				nextAck(t, m, 3)
			}
		})
	}
}

// The reserve slots bound what a member holds: Buffer records, plus one
// per publisher. A member with a Buffer of 1 and two busy publishers
// that took 10 records (and acknowledged none) has at most 3 more
// leased, waiting in its buffer.
func TestReserveSlotsBoundLeases(t *testing.T) {
	pubs := publishers(t, 2, 20)
	m := member(t, group.MemberConfig{Name: "a", Buffer: 1}, pubs...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 10 {
		if _, err := m.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // room for a fetch beyond the bound
	var leased uint64
	for _, p := range pubs {
		c, _ := p.groups.Counters("s", "g")
		leased += c.Delivered
	}
	if leased < 10 || leased > 13 {
		t.Fatalf("%d records leased to a member of Buffer 1 with two publishers that took 10, want 10 to 13", leased)
	}
}

// The reserve slots leave the member's slots whole: after concurrent
// Next calls take every record of three publishers through a Buffer of
// 2 (reserves taken, repaid), then a Next waits while fetches, some by
// the reserve, wait at the idle publishers, and the member closes, its
// slots add up to Buffer again, it owes no link, and every link's
// reserve is free.
func TestReserveKeepsSlotsWhole(t *testing.T) {
	for round := 0; round < 3; round++ {
		const buffer = 2
		m := member(t, group.MemberConfig{Name: "a", Buffer: buffer}, publishers(t, 3, 200)...)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var wg sync.WaitGroup
		var taken atomic.Int64
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for taken.Add(1) <= 600 {
					msg, err := m.Next(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if err := msg.Ack(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		cancel()
		// Every record taken: Next waits, with a fetch (by the
		// reserve, for some) waiting at each idle publisher.
		wctx, wcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		if msg, err := m.Next(wctx); err == nil {
			t.Fatalf("round %d: a record after all were taken: %+v", round, msg)
		}
		wcancel()
		// More slots than Buffer would fill the member's slot channel
		// and hang the handing back: bounded here.
		type count struct{ slots, owed, reserves, links int }
		done := make(chan count, 1)
		go func() {
			var c count
			c.slots, c.owed, c.reserves, c.links = m.CloseAndCountSlots()
			done <- c
		}()
		var c count
		select {
		case c = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: Close hung (slots given back beyond Buffer?)", round)
		}
		slots, owed, reserves, links := c.slots, c.owed, c.reserves, c.links
		if slots != buffer || owed != 0 || reserves != links || links != 3 {
			t.Fatalf("round %d: after close, %d slots (want %d), %d debts, %d of %d reserves free", round, slots, buffer, owed, reserves, links)
		}
	}
}

// A fetch larger than a data frame comes in several (FlagFrames): every
// record reaches the member, once, whole.
func TestFetchOverSeveralFrames(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	const n = 2000 // about 250 KB of replies
	p.publish(t, "s", n)
	m := member(t, group.MemberConfig{Name: "a", Buffer: n, MaxAckPending: n}, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := make([]bool, n)
	for i := 0; i < n; i++ {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if msg.Offset >= n || seen[msg.Offset] || string(msg.Value) != fmt.Sprintf("r%d", msg.Offset) {
			t.Fatalf("record %d: offset %d, value %q (seen before: %v)", i, msg.Offset, msg.Value, msg.Offset < n && seen[msg.Offset])
		}
		seen[msg.Offset] = true
		if err := msg.Ack(ctx); err != nil {
			t.Fatal(err)
		}
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

// A delayed record of an ordered group held behind an earlier record of
// its key is leased when due once that one is settled: not when the
// member's next fetch comes.
func TestDelayedBehindItsKey(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	l, err := p.open("s")
	if err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(700 * time.Millisecond)
	if _, err := l.Append(context.Background(),
		spool.Record{Value: []byte("a"), Headers: []spool.Header{group.Key("k")}},
		spool.Record{Value: []byte("b"), Headers: []spool.Header{group.Key("k"), group.NotBefore(due)}}); err != nil {
		t.Fatal(err)
	}
	m := member(t, group.MemberConfig{Ordered: true, MaxWait: time.Minute}, p)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msg, err := m.Next(ctx)
	if err != nil || string(msg.Value) != "a" {
		t.Fatalf("first: %v %v", msg, err)
	}
	if err := msg.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	msg, err = m.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Value) != "b" || time.Now().Before(due) {
		t.Fatalf("got %q at %v, due %v", msg.Value, time.Now(), due)
	}
}

// A delayed record read by the clock's own pass (a lease ran out, which
// made room for the member's waiting fetch) is leased when due: the
// wake-up it asks for during the pass is kept.
func TestDelayedReadByTheClock(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	l, err := p.open("s")
	if err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(800 * time.Millisecond)
	if _, err := l.Append(context.Background(), spool.Record{Value: []byte("held")},
		spool.Record{Value: []byte("later"), Headers: []spool.Header{group.NotBefore(due)}}); err != nil {
		t.Fatal(err)
	}
	m := member(t, group.MemberConfig{MaxAckPending: 1, Buffer: 1, AckWait: 200 * time.Millisecond, MaxDeliver: 1, MaxWait: time.Minute}, p)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msg, err := m.Next(ctx) // leased, never acked: its lease runs out
	if err != nil || string(msg.Value) != "held" {
		t.Fatalf("first: %v %v", msg, err)
	}
	msg, err = m.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Value) != "later" || time.Now().Before(due) {
		t.Fatalf("got %q at %v, due %v", msg.Value, time.Now(), due)
	}
}
