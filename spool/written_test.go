package spool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
)

// readWrittenN reads n records with a ReadWritten Reader from offset
// from, failing the test if they do not come within a few seconds.
func readWrittenN(t *testing.T, l *Log, from uint64, n int) []Record {
	t.Helper()
	rd, err := l.NewReader(from)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rd.ReadWritten()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := make([]Record, 0, n)
	for len(out) < n {
		r, err := rd.Next(ctx)
		if err != nil {
			t.Fatalf("after %d records: %v", len(out), err)
		}
		out = append(out, r)
	}
	return out
}

// TestReadWritten: while the fsync of a group is held, a ReadWritten
// Reader reads its records (and one blocked at the tail wakes for them),
// WrittenOffset and WaitWritten count them, the appends are not
// acknowledged, and nothing else sees them: NextOffset, ReadRaw, Wait and
// a plain Reader stop at the durable end. After the fsync they are
// published and no longer noted.
func TestReadWritten(t *testing.T) {
	l := openT(t, Config{Dir: t.TempDir(), Sync: SyncEach})
	g := newSyncGate(t, l)
	appendValues(t, l, "a", 100)

	tail, err := l.NewReader(100)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	tail.ReadWritten()
	got := make(chan Record, 1)
	go func() {
		r, err := tail.Next(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()

	g.holdNext()
	acks := appendAsyncValues(t, l, "b", 30)
	<-g.entered
	testutil.WaitFor(t, "30 records written", 0, func() bool { return l.WrittenOffset() == 130 })
	if r := <-got; r.Offset != 100 || string(r.Value) != "b-0" {
		t.Fatalf("the reader at the tail woke with offset %d %q", r.Offset, r.Value)
	}
	recs := readWrittenN(t, l, 95, 35)
	for i, r := range recs {
		want := fmt.Sprintf("a-%d", 95+i)
		if i >= 5 {
			want = fmt.Sprintf("b-%d", i-5)
		}
		if r.Offset != uint64(95+i) || string(r.Value) != want {
			t.Fatalf("record %d: offset %d %q, want %q", i, r.Offset, r.Value, want)
		}
	}
	if err := l.WaitWritten(context.Background(), 129); err != nil {
		t.Fatal(err)
	}
	for _, a := range acks {
		select {
		case <-a.Done():
			t.Fatal("an append was acknowledged before its fsync")
		default:
		}
	}
	if n := l.NextOffset(); n != 100 {
		t.Fatalf("NextOffset %d before the fsync", n)
	}
	if data, next, err := l.ReadRaw(100, 1<<20); err != nil || len(data) != 0 || next != 100 {
		t.Fatalf("ReadRaw past the durable end: %d bytes, next %d, %v", len(data), next, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := l.Wait(ctx, 100); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait for a record not durable: %v", err)
	}
	plain, err := l.NewReader(100)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if r, err := plain.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a plain Reader read offset %d (%v) before the fsync", r.Offset, err)
	}

	g.open()
	for _, a := range acks {
		if _, err := a.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n, w := l.NextOffset(), l.WrittenOffset(); n != 130 || w != 130 {
		t.Fatalf("after the fsync: NextOffset %d, WrittenOffset %d", n, w)
	}
	l.mu.RLock()
	noted := len(l.early)
	l.mu.RUnlock()
	if noted != 0 {
		t.Fatalf("%d groups still noted after their publication", noted)
	}
	if recs := readWrittenN(t, l, 0, 130); string(recs[129].Value) != "b-29" {
		t.Fatalf("last record %q", recs[129].Value)
	}
}

// TestReadWrittenAcrossSegments: records written while the fsync is held
// span several segments; a ReadWritten Reader reads them all, in order.
func TestReadWrittenAcrossSegments(t *testing.T) {
	l := openT(t, Config{Dir: t.TempDir(), Sync: SyncEach, SegmentBytes: 4 << 10, Codec: CodecNone})
	g := newSyncGate(t, l)
	appendValues(t, l, "a", 10)
	g.holdNext()
	var acks []*Ack
	for i := range 40 { // one group each: several segments
		a, err := l.AppendAsync(context.Background(), Record{Value: fmt.Appendf(nil, "b-%d-%0200d", i, 0)})
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, a)
		if i == 0 {
			<-g.entered
		}
		testutil.WaitFor(t, "the record written", 0, func() bool { return l.WrittenOffset() == uint64(11+i) })
	}
	recs := readWrittenN(t, l, 0, 50)
	for i, r := range recs[10:] {
		if r.Offset != uint64(10+i) || string(r.Value[:len(fmt.Sprintf("b-%d-", i))]) != fmt.Sprintf("b-%d-", i) {
			t.Fatalf("record %d: offset %d %.10q", 10+i, r.Offset, r.Value)
		}
	}
	if n := l.NextOffset(); n > 10 {
		t.Fatalf("NextOffset %d while the fsync is held", n)
	}
	l.mu.RLock()
	segs := len(l.segs)
	l.mu.RUnlock()
	if segs < 3 {
		t.Fatalf("%d segments: the records did not span several", segs)
	}
	g.open()
	for _, a := range acks {
		if _, err := a.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.NextOffset(); n != 50 {
		t.Fatalf("NextOffset %d", n)
	}
}

// TestReadWrittenFailure: a failed fsync (the segment's file closed under
// the held syncer) fails the held group's appends, and the records written are forgotten:
// WrittenOffset falls back to the durable end and a ReadWritten Reader
// reads no further.
func TestReadWrittenFailure(t *testing.T) {
	l := openT(t, Config{Dir: t.TempDir(), Sync: SyncEach})
	g := newSyncGate(t, l)
	appendValues(t, l, "a", 10)
	g.holdNext()
	acks := appendAsyncValues(t, l, "b", 10)
	<-g.entered
	testutil.WaitFor(t, "written", 0, func() bool { return l.WrittenOffset() == 20 })
	l.mu.RLock()
	f := l.segs[len(l.segs)-1].f
	l.mu.RUnlock()
	f.Close() // the held fdatasync fails
	g.open()
	for _, a := range acks {
		if _, err := a.Wait(context.Background()); err == nil {
			t.Fatal("an append was acknowledged after the failure")
		}
	}
	if w := l.WrittenOffset(); w != 10 {
		t.Fatalf("WrittenOffset %d after the failure", w)
	}
	rd, err := l.NewReader(10)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rd.ReadWritten()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if r, err := rd.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read offset %d (%v) of a failed group", r.Offset, err)
	}
}

// TestReadWrittenCrash: records a ReadWritten Reader saw and a machine
// crash then took from the disk (their fsync never ran) were never
// acknowledged; the log reopens at its durable end in a new epoch, so
// their reader learns that the offsets it read there now name other
// records. A process crash loses none of them.
func TestReadWrittenCrash(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Config{Dir: dir, Sync: SyncEach})
	g := newSyncGate(t, l)
	appendValues(t, l, "old", 1000)
	testutil.WaitFor(t, "checkpoint at 1000", 0, func() bool {
		m, ok, err := readMeta(dir)
		return err == nil && ok && m.Acked == 1000
	})
	g.holdNext()
	acks := appendAsyncValues(t, l, "early", 50)
	<-g.entered
	testutil.WaitFor(t, "50 records written", 0, func() bool { return l.WrittenOffset() == 1050 })
	if recs := readWrittenN(t, l, 1000, 50); string(recs[49].Value) != "early-49" {
		t.Fatalf("read %q", recs[49].Value)
	}
	epoch, _ := l.Epoch()
	killed, powered := crashImages(t, dir, 100)
	g.open()
	for _, a := range acks {
		<-a.Done()
	}

	lk := openT(t, Config{Dir: killed})
	if r := lk.Recovery(); r.Lost() != 0 || lk.NextOffset() != 1050 {
		t.Fatalf("after a process crash: %+v, next %d", r, lk.NextOffset())
	}
	lp := openT(t, Config{Dir: powered})
	r := lp.Recovery()
	if !r.Unclean || !r.NewEpoch || r.Lost() != 0 || r.EpochStart != 1000 || lp.NextOffset() != 1000 {
		t.Fatalf("after a machine crash: %+v, next %d", r, lp.NextOffset())
	}
	if end, ok := lp.EpochEnd(epoch); !ok || end != 1000 {
		t.Fatalf("the epoch the reader read in ended at %d (%v), want 1000", end, ok)
	}
}

// TestWriterRunsAheadOfStalledFsync: while an fsync stalls, the writer
// keeps writing appends (one group each: each is written before the next
// comes) far beyond the 65 groups an fsync used to hold back, so
// ReadWritten readers get them at once; none is acknowledged until the
// fsync ends, then all are, in order.
func TestWriterRunsAheadOfStalledFsync(t *testing.T) {
	l := openT(t, Config{Dir: t.TempDir(), Sync: SyncGroup, GroupInterval: -1})
	g := newSyncGate(t, l)
	g.holdNext()
	first := appendAsyncValues(t, l, "a", 1)
	<-g.entered

	const n = 2000
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	acks := make([]*Ack, n)
	for i := range acks {
		a, err := l.AppendAsync(ctx, Record{Value: fmt.Appendf(nil, "b-%d", i)})
		if err != nil {
			t.Fatalf("append %d while the fsync is held: %v", i, err)
		}
		acks[i] = a
		if err := l.WaitWritten(ctx, uint64(i+1)); err != nil {
			t.Fatalf("append %d not written while the fsync is held: %v", i, err)
		}
	}
	if w := l.WrittenOffset(); w != n+1 {
		t.Fatalf("WrittenOffset %d, want %d", w, n+1)
	}
	recs := readWrittenN(t, l, 1, n)
	for i, r := range recs {
		if want := fmt.Sprintf("b-%d", i); r.Offset != uint64(i+1) || string(r.Value) != want {
			t.Fatalf("record %d: offset %d %q, want %q", i, r.Offset, r.Value, want)
		}
	}
	for i, a := range append(first, acks...) {
		select {
		case <-a.Done():
			t.Fatalf("append %d acknowledged while the fsync is held", i)
		default:
		}
	}
	if next := l.NextOffset(); next != 0 {
		t.Fatalf("NextOffset %d while the fsync is held, want 0", next)
	}
	g.open()
	for i, a := range append(first, acks...) {
		off, err := a.Wait(ctx)
		if err != nil || off != uint64(i) {
			t.Fatalf("append %d: offset %d, %v", i, off, err)
		}
	}
}

// TestSyncQueueBound: the writer's put waits once maxUnsyncedGroups groups
// are pending, until the syncer commits some; take hands over every queued
// group in order and says when the writer has exited.
func TestSyncQueueBound(t *testing.T) {
	var q syncQueue
	q.init()
	for i := range maxUnsyncedGroups {
		q.put(&pendingWrite{records: int32(i)})
	}
	put := make(chan struct{})
	go func() {
		q.put(&pendingWrite{records: -1})
		q.close()
		close(put)
	}()
	select {
	case <-put:
		t.Fatal("put did not wait with maxUnsyncedGroups groups pending")
	case <-time.After(50 * time.Millisecond):
	}
	batch, open := q.take(nil)
	if len(batch) != maxUnsyncedGroups || !open {
		t.Fatalf("took %d groups (open %v), want %d", len(batch), open, maxUnsyncedGroups)
	}
	for i, pw := range batch {
		if pw.records != int32(i) {
			t.Fatalf("group %d out of order: %d", i, pw.records)
		}
	}
	select {
	case <-put:
		t.Fatal("put went on before the syncer committed anything")
	case <-time.After(50 * time.Millisecond):
	}
	q.done(1)
	<-put
	batch, open = q.take(batch[:0])
	if len(batch) != 1 || batch[0].records != -1 || open {
		t.Fatalf("after close: took %d groups (open %v), want the last one and closed", len(batch), open)
	}
}

// segmentGate is a log handler that, once armed, holds the writer in the
// log call that reports a new segment: between the writer's check for a
// failure and its write of the group that rolled.
type segmentGate struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (h *segmentGate) Enabled(context.Context, slog.Level) bool { return true }
func (h *segmentGate) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *segmentGate) WithGroup(string) slog.Handler            { return h }
func (h *segmentGate) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "segment created" && h.armed.CompareAndSwap(true, false) {
		h.entered <- struct{}{}
		<-h.release
	}
	return nil
}

// TestNoteAfterFailure: a group the writer finishes after the syncer
// failed (and dropped the groups noted for ReadWritten readers) is not
// noted: WrittenOffset stays at NextOffset, and no reader gets records
// that will never be acknowledged, while that group waits for its commit.
func TestNoteAfterFailure(t *testing.T) {
	h := &segmentGate{entered: make(chan struct{}, 1), release: make(chan struct{})}
	var releaseOnce sync.Once
	releaseWriter := func() { releaseOnce.Do(func() { close(h.release) }) }
	t.Cleanup(releaseWriter)
	l := openT(t, Config{Dir: t.TempDir(), Sync: SyncEach, SegmentBytes: 4 << 10, Logger: slog.New(h)})

	// The syncer's first commit waits for sync1, its second signals
	// entered2 and waits for sync2.
	sync1, entered2, sync2 := make(chan struct{}), make(chan struct{}, 1), make(chan struct{})
	var syncOnce1, syncOnce2 sync.Once
	open1 := func() { syncOnce1.Do(func() { close(sync1) }) }
	open2 := func() { syncOnce2.Do(func() { close(sync2) }) }
	t.Cleanup(open2)
	t.Cleanup(open1)
	var commits atomic.Int32
	entered1 := make(chan struct{}, 1)
	l.beforeSync = func() {
		switch commits.Add(1) {
		case 1:
			entered1 <- struct{}{}
			<-sync1
		case 2:
			entered2 <- struct{}{}
			<-sync2
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	value := bytes.Repeat([]byte("x"), 3000) // one record fills a segment
	a1, err := l.AppendAsync(ctx, Record{Value: value})
	if err != nil {
		t.Fatal(err)
	}
	<-entered1 // record 0, in the first segment, waits for its fsync
	if w := l.WrittenOffset(); w != 1 {
		t.Fatalf("WrittenOffset %d with record 0 written, want 1", w)
	}
	h.armed.Store(true)
	a2, err := l.AppendAsync(ctx, Record{Value: value})
	if err != nil {
		t.Fatal(err)
	}
	<-h.entered // the writer has checked for a failure and rolled to a new segment

	l.mu.RLock()
	f := l.segs[0].f
	l.mu.RUnlock()
	f.Close() // record 0's fdatasync fails
	open1()
	if _, err := a1.Wait(ctx); err == nil {
		t.Fatal("record 0 acknowledged after its fsync failed")
	}
	releaseWriter() // the writer writes record 1 and hands it to the syncer
	select {
	case <-entered2:
	case <-ctx.Done():
		t.Fatal("the syncer never took record 1")
	}
	if w, n := l.WrittenOffset(), l.NextOffset(); w != n {
		t.Fatalf("WrittenOffset %d, NextOffset %d: a group written after the failure was noted", w, n)
	}
	rd, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rd.ReadWritten()
	rctx, rcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer rcancel()
	if r, err := rd.Next(rctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read offset %d (%v) of a failed log", r.Offset, err)
	}
	open2()
	if _, err := a2.Wait(ctx); err == nil {
		t.Fatal("record 1 acknowledged after the failure")
	}
}
