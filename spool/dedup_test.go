package spool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// dupOf asserts err is a *DuplicateError naming offset want (known).
func dupOf(t *testing.T, err error, want uint64) {
	t.Helper()
	var de *DuplicateError
	if !errors.As(err, &de) || !errors.Is(err, ErrDuplicate) || !de.Known || de.Offset != want {
		t.Fatalf("got %v, want a duplicate of offset %d", err, want)
	}
}

func TestDedupMsgID(t *testing.T) {
	ctx := context.Background()
	l, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(ctx, Record{Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	off, err := l.Append(ctx, Record{Value: []byte("a"), Headers: []Header{MsgID("order-1")}})
	if err != nil || off != 1 {
		t.Fatalf("first append: %d %v", off, err)
	}
	got, err := l.Append(ctx, Record{Value: []byte("a again"), Headers: []Header{MsgID("order-1")}})
	dupOf(t, err, 1)
	if got != 1 || l.NextOffset() != 2 {
		t.Fatalf("duplicate returned %d, next %d: want the first offset, nothing appended", got, l.NextOffset())
	}
	// Through AppendAsync, the Ack says the same.
	a, err := l.AppendAsync(ctx, Record{Value: []byte("a"), Headers: []Header{MsgID("order-1")}})
	if err != nil {
		t.Fatal(err)
	}
	got, err = a.Wait(ctx)
	dupOf(t, err, 1)
	if d := a.Duplicates(); got != 1 || len(d) != 1 || d[0] != (Duplicate{Index: 0, Offset: 1, Known: true}) {
		t.Fatalf("async duplicate: %d %+v", got, d)
	}
	// Another id appends.
	if off, err := l.Append(ctx, Record{Value: []byte("b"), Headers: []Header{MsgID("order-2")}}); err != nil || off != 2 {
		t.Fatalf("other id: %d %v", off, err)
	}
	// In one call: the repeat of an earlier record of the call and of an
	// old one are left out, the others appended contiguously.
	a, err = l.AppendAsync(ctx,
		Record{Value: []byte("c"), Headers: []Header{MsgID("order-3")}},
		Record{Value: []byte("c2"), Headers: []Header{MsgID("order-3")}},
		Record{Value: []byte("plain")},
		Record{Value: []byte("b2"), Headers: []Header{MsgID("order-2")}},
	)
	if err != nil {
		t.Fatal(err)
	}
	first, err := a.Wait(ctx)
	if err != nil || first != 3 || l.NextOffset() != 5 {
		t.Fatalf("mixed call: first %d err %v next %d", first, err, l.NextOffset())
	}
	want := []Duplicate{{Index: 1, Offset: 3, Known: true}, {Index: 3, Offset: 2, Known: true}}
	if d := a.Duplicates(); fmt.Sprint(d) != fmt.Sprint(want) {
		t.Fatalf("mixed call duplicates %+v, want %+v", d, want)
	}
	recs := readAll(t, l, 0)
	if len(recs) != 5 || string(recs[3].Value) != "c" || string(recs[4].Value) != "plain" {
		t.Fatalf("log holds %d records: %q %q", len(recs), recs[3].Value, recs[4].Value)
	}
}

func TestDedupWindow(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// A record whose time is older than the window is outside it: its id
	// no longer makes a duplicate.
	old := time.Now().Add(-DefaultDedupWindow - time.Second)
	if _, err := l.Append(ctx, Record{Time: old, Value: []byte("old"), Headers: []Header{MsgID("k")}}); err != nil {
		t.Fatal(err)
	}
	if off, err := l.Append(ctx, Record{Value: []byte("new"), Headers: []Header{MsgID("k")}}); err != nil || off != 1 {
		t.Fatalf("after the window: %d %v, want appended at 1", off, err)
	}
	_, err = l.Append(ctx, Record{Value: []byte("again"), Headers: []Header{MsgID("k")}})
	dupOf(t, err, 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The same holds after a reopen, which rebuilds the window from the log.
	l, err = Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Append(ctx, Record{Value: []byte("again"), Headers: []Header{MsgID("k")}})
	dupOf(t, err, 1)
	if l.NextOffset() != 2 {
		t.Fatalf("next %d, want 2", l.NextOffset())
	}
	// A configured window: a shorter one lets the id through.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(Config{Dir: dir, DedupWindow: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if off, err := l.Append(ctx, Record{Time: time.Now().Add(-time.Millisecond), Value: []byte("x"), Headers: []Header{MsgID("k")}}); err != nil || off != 2 {
		t.Fatalf("1 ns window: %d %v", off, err)
	}
}

func TestDedupProducer(t *testing.T) {
	ctx := context.Background()
	l, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for seq := uint64(1); seq <= 3; seq++ {
		if off, err := l.Append(ctx, Record{Value: []byte("v"), Headers: []Header{ProducerSeq("p:1", seq)}}); err != nil || off != seq-1 {
			t.Fatalf("seq %d: %d %v", seq, off, err)
		}
	}
	// The last sequence again: a duplicate of its offset.
	_, err = l.Append(ctx, Record{Headers: []Header{ProducerSeq("p:1", 3)}})
	dupOf(t, err, 2)
	// An older one: a duplicate whose offset is not kept.
	_, err = l.Append(ctx, Record{Headers: []Header{ProducerSeq("p:1", 1)}})
	var de *DuplicateError
	if !errors.As(err, &de) || de.Known {
		t.Fatalf("older sequence: %v, want a duplicate without offset", err)
	}
	// A gap: a clear error, nothing of the call stored.
	_, err = l.Append(ctx, Record{Headers: []Header{ProducerSeq("p:1", 4)}}, Record{Headers: []Header{ProducerSeq("p:1", 6)}})
	var se *SequenceError
	if !errors.As(err, &se) || !errors.Is(err, ErrSequence) || se.Seq != 6 || se.Last != 4 || se.Unknown {
		t.Fatalf("gap: %v", err)
	}
	if l.NextOffset() != 3 {
		t.Fatalf("a call with a gap stored records: next %d", l.NextOffset())
	}
	// A producer it has never seen starts at 1.
	_, err = l.Append(ctx, Record{Headers: []Header{ProducerSeq("q", 7)}})
	if !errors.As(err, &se) || !se.Unknown {
		t.Fatalf("unknown producer at 7: %v", err)
	}
	// A retried batch that partly landed: the rest is appended.
	a, err := l.AppendAsync(ctx, Record{Value: []byte("3"), Headers: []Header{ProducerSeq("p:1", 3)}},
		Record{Value: []byte("4"), Headers: []Header{ProducerSeq("p:1", 4)}})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := a.Wait(ctx); err != nil || first != 3 || len(a.Duplicates()) != 1 || l.NextOffset() != 4 {
		t.Fatalf("partly landed batch: first %d err %v dups %+v", first, err, a.Duplicates())
	}
	// Malformed headers are refused before anything is queued.
	for _, h := range []Header{{Key: HeaderProducer, Value: []byte("p")}, {Key: HeaderProducer, Value: []byte("p:0")},
		{Key: HeaderProducer, Value: []byte(":3")}, {Key: HeaderProducer, Value: []byte("p:x")}, {Key: HeaderMsgID}} {
		if _, err := l.Append(ctx, Record{Headers: []Header{h}}); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("header %s=%q: %v, want ErrInvalidRecord", h.Key, h.Value, err)
		}
	}
}

func TestDedupProducerCap(t *testing.T) {
	ctx := context.Background()
	l, err := Open(Config{Dir: t.TempDir(), MaxProducers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, p := range []string{"a", "b", "c"} {
		if _, err := l.Append(ctx, Record{Headers: []Header{ProducerSeq(p, 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	// a, whose last record is the oldest, was forgotten for c: its next
	// record is refused as from an unknown producer, never taken in silence.
	var se *SequenceError
	if _, err := l.Append(ctx, Record{Headers: []Header{ProducerSeq("a", 2)}}); !errors.As(err, &se) || !se.Unknown {
		t.Fatalf("forgotten producer: %v", err)
	}
	if _, err := l.Append(ctx, Record{Headers: []Header{ProducerSeq("b", 2)}}); err != nil {
		t.Fatalf("remembered producer: %v", err)
	}
}

// TestDedupReopen: ids and producer sequences hold across Close and Open,
// from dedup.json alone (nothing after the checkpoint to scan) and from the
// log alone (the file removed: the records after the checkpoint rebuild it).
func TestDedupReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 10; i++ {
		if _, err := l.Append(ctx, Record{Headers: []Header{ProducerSeq("p", i), MsgID(fmt.Sprint("m", i))}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, ok, err := readDedup(dir)
	if err != nil || !ok || f.Through != 10 || len(f.Producers) != 1 || f.Producers[0].Seq != 10 || f.Producers[0].Offset != 9 {
		t.Fatalf("dedup.json after Close: %+v %v %v", f, ok, err)
	}
	check := func(l *Log) {
		t.Helper()
		_, err := l.Append(ctx, Record{Headers: []Header{ProducerSeq("p", 10)}})
		dupOf(t, err, 9)
		_, err = l.Append(ctx, Record{Headers: []Header{MsgID("m4")}})
		dupOf(t, err, 3)
		var se *SequenceError
		if _, err := l.Append(ctx, Record{Headers: []Header{ProducerSeq("p", 12)}}); !errors.As(err, &se) || se.Last != 10 {
			t.Fatalf("gap after reopen: %v", err)
		}
	}
	l, err = Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The checkpoint at 0 and no file: the whole log is scanned.
	m, _, err := readMeta(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.Acked = 0
	if err := writeMeta(dir, m); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, dedupFileName)); err != nil {
		t.Fatal(err)
	}
	l, err = Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A damaged file is moved aside and the state rebuilt from the log.
	if err := os.WriteFile(filepath.Join(dir, dedupFileName), []byte(`{"version":1,"data":{"through":3,"producers":[{"id":"p","seq":0}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err = Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	check(l)
	if q, _ := filepath.Glob(filepath.Join(dir, "quarantine", dedupFileName+".damaged-*")); len(q) != 1 {
		t.Fatalf("damaged state file not in quarantine: %v", q)
	}
}

// TestDedupConcurrent: many goroutines append the same id (and the same
// producer sequence) at once; exactly one record lands, and every other
// call is told it is a duplicate of that record.
func TestDedupConcurrent(t *testing.T) {
	ctx := context.Background()
	l, err := Open(Config{Dir: t.TempDir(), Sync: SyncEach})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for round := 0; round < 20; round++ {
		hdrs := [][]Header{{MsgID(fmt.Sprint("same-", round))}, {ProducerSeq(fmt.Sprint("p", round), 1)}}
		for _, h := range hdrs {
			before := l.NextOffset()
			var wg sync.WaitGroup
			var mu sync.Mutex
			landed, dups := 0, map[uint64]int{}
			for g := 0; g < 32; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					off, err := l.Append(ctx, Record{Value: []byte("v"), Headers: h})
					var de *DuplicateError
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						landed++
						dups[off]++
					case errors.As(err, &de):
						dups[de.Offset]++
					default:
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if landed != 1 || l.NextOffset() != before+1 || dups[before] != 32 {
				t.Fatalf("round %d %s: %d landed, next %d (was %d), offsets told %v", round, h[0].Key, landed, l.NextOffset(), before, dups)
			}
		}
	}
}

func FuzzDedupFile(f *testing.F) {
	f.Add([]byte(`{"version":1,"data":{"through":10,"id_time":5,"producers":[{"id":"p","seq":3,"offset":9,"time":1}]}}`))
	f.Add([]byte(`{"version":1,"data":{"through":0,"producers":[]}}`))
	f.Add([]byte(`{"version":2,"data":{}}`))
	f.Add([]byte(`{"through":1}`))
	f.Add([]byte(`{"version":1,"data":{"through":10,"producers":[{"id":"p","seq":1,"offset":1},{"id":"p","seq":2,"offset":2}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := decodeDedupFile(b)
		if err != nil {
			return
		}
		// What decodes is consistent and survives a round trip.
		p := newProducers(DefaultMaxProducers)
		for _, e := range d.Producers {
			if e.Seq == 0 || e.Offset >= d.Through || e.ID == "" || len(e.ID) > MaxProducerIDLen {
				t.Fatalf("accepted %+v", e)
			}
			p.set(e.ID, prodMark{Seq: e.Seq, Offset: e.Offset, Time: e.Time})
		}
		dir := t.TempDir()
		dd := durableDedup{prods: p, idTime: d.IDTime}
		if err := writeDedup(dir, dd.snapshot(d.Through)); err != nil {
			t.Fatal(err)
		}
		back, ok, err := readDedup(dir)
		if err != nil || !ok || back.Through != d.Through || len(back.Producers) != len(p.m) {
			t.Fatalf("round trip: %+v %v %v", back, ok, err)
		}
	})
}

func FuzzDedupHeaders(f *testing.F) {
	f.Add("fastmq-producer", []byte("p:1"))
	f.Add("fastmq-producer", []byte("a:b:18446744073709551615"))
	f.Add("fastmq-producer", []byte(":1"))
	f.Add("fastmq-msg-id", []byte("order-1"))
	f.Add("fastmq-msg-id", []byte(""))
	f.Fuzz(func(t *testing.T, key string, v []byte) {
		r := Record{Headers: []Header{{Key: key, Value: v}}}
		k, ok, err := parseDedup(&r, 0, false, false)
		if err != nil {
			return
		}
		if ok && k.seq != 0 {
			if k.producer == "" || len(k.producer) > MaxProducerIDLen {
				t.Fatalf("producer %q accepted", k.producer)
			}
			// What parses is what ProducerSeq makes.
			if h := ProducerSeq(k.producer, k.seq); key == HeaderProducer && string(h.Value) != string(v) {
				if k2, _, _ := parseDedup(&Record{Headers: []Header{h}}, 0, false, false); k2 != k {
					t.Fatalf("%q parses to %+v, its rendering %q to %+v", v, k, h.Value, k2)
				}
			}
		}
		if ok && k.msgID != "" && (len(k.msgID) > MaxMsgIDLen || k.msgID != string(v)) {
			t.Fatalf("message id %q from %q", k.msgID, v)
		}
	})
}

// TestDedupBothHeaders: a record with a producer sequence and a message
// id is decided by its sequence; the id names the original of an older
// repeat.
func TestDedupBothHeaders(t *testing.T) {
	ctx := context.Background()
	l := openT(t, Config{Dir: t.TempDir()})
	if _, err := l.Append(ctx, Record{Headers: []Header{MsgID("x")}}); err != nil {
		t.Fatal(err)
	}
	// Sequence 1 is new although its id was seen: stored, and sequence 2 follows.
	for seq := uint64(1); seq <= 2; seq++ {
		if off, err := l.Append(ctx, Record{Headers: []Header{ProducerSeq("p", seq), MsgID([]string{"", "x", "y"}[seq])}}); err != nil || off != seq {
			t.Fatalf("seq %d: %d %v", seq, off, err)
		}
	}
	_, err := l.Append(ctx, Record{Headers: []Header{ProducerSeq("p", 1), MsgID("x")}})
	dupOf(t, err, 1)
}
