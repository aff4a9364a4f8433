package spool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

func openT(t testing.TB, cfg Config) *Log {
	t.Helper()
	l, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func readAll(t testing.TB, l *Log, from uint64) []Record {
	t.Helper()
	var out []Record
	for from < l.NextOffset() {
		data, next, err := l.ReadRaw(from, 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		if err := DecodeBatches(data, from, 0, func(r Record) error { out = append(out, r); return nil }); err != nil {
			t.Fatal(err)
		}
		if next <= from {
			t.Fatalf("ReadRaw(%d) did not advance: next %d", from, next)
		}
		from = next
	}
	return out
}

func sameRecord(a, b Record) error {
	if a.ID != b.ID || !a.Time.Equal(b.Time) || !bytes.Equal(a.Value, b.Value) || len(a.Headers) != len(b.Headers) {
		return fmt.Errorf("record differs:\n got %+v\nwant %+v", a, b)
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return fmt.Errorf("header %d differs: %+v vs %+v", i, a.Headers[i], b.Headers[i])
		}
	}
	return nil
}

func TestRoundTrip(t *testing.T) {
	for _, c := range []Codec{CodecNone, CodecS2, CodecZstd} {
		for _, p := range []SyncPolicy{SyncGroup, SyncEach, SyncNone} {
			t.Run(c.String()+"/"+p.String(), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				cfg := Config{Dir: dir, Codec: c, Sync: p, SegmentBytes: 16 << 10, GroupInterval: 100 * time.Microsecond}
				l := openT(t, cfg)
				ctx := context.Background()
				var want []Record
				base := time.Unix(1700000000, 123).UTC()
				for i := 0; i < 60; i++ {
					var recs []Record
					for j := 0; j < i%4+1; j++ {
						r := Record{Value: bytes.Repeat([]byte{byte(i)}, (i*37+j*11)%700)}
						if j%2 == 0 {
							r.ID = uuid.New()
							r.Time = base.Add(time.Duration(i) * time.Second)
						}
						if i%3 == 0 {
							r.Headers = []Header{{Key: "k", Value: []byte("v")}, {Key: "", Value: nil}}
						}
						recs = append(recs, r)
					}
					if i == 30 {
						recs = append(recs, Record{Value: bytes.Repeat([]byte("big"), 20000)}) // bigger than a segment
					}
					before := time.Now()
					first, err := l.Append(ctx, recs...)
					if err != nil {
						t.Fatal(err)
					}
					if first != uint64(len(want)) {
						t.Fatalf("first = %d, want %d", first, len(want))
					}
					got := readAll(t, l, first) // visible once Append returned
					if len(got) != len(recs) {
						t.Fatalf("read %d records after append of %d", len(got), len(recs))
					}
					for j := range recs {
						if recs[j].ID == (uuid.UUID{}) {
							if got[j].ID.Version() != 4 || got[j].Time.Before(before.Add(-time.Millisecond)) {
								t.Fatalf("filled-in id/time wrong: %v %v", got[j].ID, got[j].Time)
							}
							recs[j].ID, recs[j].Time = got[j].ID, got[j].Time
						}
						if len(recs[j].Headers) == 0 {
							recs[j].Headers = nil
						}
						want = append(want, recs[j])
					}
				}
				check := func(l *Log) {
					got := readAll(t, l, 0)
					if len(got) != len(want) {
						t.Fatalf("got %d records, want %d", len(got), len(want))
					}
					for i := range got {
						if got[i].Offset != uint64(i) {
							t.Fatalf("offset %d at %d", got[i].Offset, i)
						}
						if err := sameRecord(got[i], want[i]); err != nil {
							t.Fatalf("offset %d: %v", i, err)
						}
					}
					r, err := l.NewReader(0)
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close()
					for i := range want {
						rec, err := r.Next(ctx)
						if err != nil {
							t.Fatal(err)
						}
						if err := sameRecord(rec, want[i]); err != nil || rec.Offset != uint64(i) {
							t.Fatalf("reader offset %d (%d): %v", i, rec.Offset, err)
						}
					}
				}
				check(l)
				if st := l.Stats(); (c == CodecNone && st.Segments < 3) || st.Codecs[c] == 0 || st.Next != uint64(len(want)) {
					t.Fatalf("stats %+v", st)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				if err := l.Close(); err != nil {
					t.Fatal("second Close:", err)
				}
				rep, err := Verify(dir)
				if err != nil || !rep.Clean() || rep.Records != uint64(len(want)) {
					t.Fatalf("verify: %+v %v", rep, err)
				}
				l2 := openT(t, cfg)
				if l2.NextOffset() != uint64(len(want)) {
					t.Fatalf("reopened next = %d", l2.NextOffset())
				}
				check(l2)
				ro, err := OpenReadOnly(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer ro.Close()
				check(ro)
			})
		}
	}
}

func TestConcurrentAppends(t *testing.T) {
	l := openT(t, Config{Dir: t.TempDir(), Sync: SyncEach, SegmentBytes: 32 << 10})
	const writers, per = 8, 40
	var wg sync.WaitGroup
	firsts := make([][]uint64, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				recs := []Record{{Value: fmt.Appendf(nil, "%d-%d-0", w, i)}, {Value: fmt.Appendf(nil, "%d-%d-1", w, i)}}
				first, err := l.Append(context.Background(), recs...)
				if err != nil {
					t.Error(err)
					return
				}
				firsts[w] = append(firsts[w], first)
			}
		}()
	}
	wg.Wait()
	got := readAll(t, l, 0)
	if len(got) != writers*per*2 {
		t.Fatalf("%d records", len(got))
	}
	for w := range firsts {
		for i, f := range firsts[w] {
			for j := 0; j < 2; j++ {
				if want := fmt.Sprintf("%d-%d-%d", w, i, j); string(got[f+uint64(j)].Value) != want {
					t.Fatalf("offset %d = %q, want %q", f+uint64(j), got[f+uint64(j)].Value, want)
				}
			}
		}
	}
}

func TestReadRawBounds(t *testing.T) {
	l := openT(t, Config{Dir: t.TempDir(), Sync: SyncNone})
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		recs := make([]Record, 10)
		for j := range recs {
			recs[j].Value = make([]byte, 100)
		}
		if _, err := l.Append(ctx, recs...); err != nil {
			t.Fatal(err)
		}
	}
	// One batch per Append here (single appender, SyncNone): 10 records each.
	data, next, err := l.ReadRaw(15, 1)
	if err != nil || next != 20 {
		t.Fatalf("next %d err %v", next, err)
	}
	var offs []uint64
	if err := DecodeBatches(data, 15, 0, func(r Record) error { offs = append(offs, r.Offset); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(offs) != 5 || offs[0] != 15 {
		t.Fatalf("offsets %v", offs)
	}
	one := len(data)
	data, next, err = l.ReadRaw(0, 3*one+one/2)
	if err != nil || next != 30 || len(data) != 3*one {
		t.Fatalf("len %d next %d err %v", len(data), next, err)
	}
	data, next, err = l.ReadRaw(200, 1000)
	if err != nil || len(data) != 0 || next != 200 {
		t.Fatalf("at tail: %d %d %v", len(data), next, err)
	}
	// Damage in a buffer is reported with its position.
	data, _, _ = l.ReadRaw(0, 2*one)
	data[one+60] ^= 1
	err = DecodeBatches(data, 0, 0, func(Record) error { return nil })
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Pos != int64(one) || ce.Offset != 10 {
		t.Fatalf("err %v", err)
	}
}

func TestSeekTime(t *testing.T) {
	l := openT(t, Config{Dir: t.TempDir(), Sync: SyncNone, SegmentBytes: 4 << 10})
	ctx := context.Background()
	t0 := time.Unix(1_000_000, 0)
	for i := 0; i < 300; i += 3 {
		var recs []Record
		for j := i; j < i+3; j++ {
			recs = append(recs, Record{Time: t0.Add(time.Duration(j) * time.Second), Value: []byte("x")})
		}
		if _, err := l.Append(ctx, recs...); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		at   time.Time
		want uint64
	}{
		{t0.Add(-time.Hour), 0},
		{t0, 0},
		{t0.Add(time.Nanosecond), 1},
		{t0.Add(100 * time.Second), 100},
		{t0.Add(100*time.Second + 1), 101},
		{t0.Add(299 * time.Second), 299},
		{t0.Add(300 * time.Second), 300},
	} {
		got, err := l.SeekTime(tc.at)
		if err != nil || got != tc.want {
			t.Errorf("SeekTime(%v) = %d, %v; want %d", tc.at.Sub(t0), got, err, tc.want)
		}
	}
	// Out-of-order times: the first record at or after T in offset order.
	first, _ := l.Append(ctx, Record{Time: t0.Add(1000 * time.Second)}, Record{Time: t0.Add(500 * time.Second)})
	if got, _ := l.SeekTime(t0.Add(400 * time.Second)); got != first {
		t.Errorf("got %d want %d", got, first)
	}
}

func TestFollowTail(t *testing.T) {
	l := openT(t, Config{Dir: t.TempDir(), Sync: SyncEach})
	r, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make(chan Record)
	errc := make(chan error, 1)
	go func() {
		for i := 0; i < 3; i++ {
			rec, err := r.Next(context.Background())
			if err != nil {
				errc <- err
				return
			}
			got <- rec
		}
		errc <- nil
	}()
	for i := 0; i < 3; i++ {
		if _, err := l.Append(context.Background(), Record{Value: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
		rec := <-got
		if rec.Offset != uint64(i) || rec.Value[0] != byte(i) {
			t.Fatalf("got %+v", rec)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// Cancellation ends a blocked Next and Wait.
	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	if _, err := r.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after cancel: %v", err)
	}
	// Close of the reader wakes its blocked Next.
	go r.Close()
	if _, err := r.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after reader Close: %v", err)
	}
	// Close of the log wakes a waiter.
	done := make(chan error, 1)
	go func() { done <- l.Wait(context.Background(), 100) }()
	l.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after Close: %v", err)
	}
}

func TestRetention(t *testing.T) {
	ctx := context.Background()
	fill := func(t *testing.T, l *Log, n int, at time.Time) {
		for i := 0; i < n; i++ {
			if _, err := l.Append(ctx, Record{Time: at, Value: make([]byte, 200)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("age", func(t *testing.T) {
		l := openT(t, Config{Dir: t.TempDir(), Sync: SyncNone, SegmentBytes: 2 << 10, RetentionAge: time.Hour})
		fill(t, l, 40, time.Now().Add(-2*time.Hour))
		oldNext := l.NextOffset()
		fill(t, l, 40, time.Now())
		if _, err := l.ApplyRetention(); err != nil { // it also runs after every roll
			t.Fatal(err)
		}
		old := l.OldestOffset()
		if old == 0 || old > oldNext {
			t.Fatalf("oldest %d, old records end at %d", old, oldNext)
		}
		_, _, err := l.ReadRaw(0, 100)
		var oe *OutOfRangeError
		if !errors.As(err, &oe) || !errors.Is(err, ErrOutOfRange) || oe.Oldest != old || oe.Requested != 0 {
			t.Fatalf("ReadRaw below oldest: %v", err)
		}
		if _, err := l.NewReader(0); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, l, old); uint64(len(got)) != l.NextOffset()-old {
			t.Fatalf("read %d", len(got))
		}
		if _, err := os.Stat(filepath.Join(l.cfg.Dir, segName(0))); !os.IsNotExist(err) {
			t.Fatalf("first segment still there: %v", err)
		}
	})
	t.Run("size+floor", func(t *testing.T) {
		l := openT(t, Config{Dir: t.TempDir(), Sync: SyncNone, SegmentBytes: 2 << 10, RetentionBytes: 6 << 10})
		l.SetFloor(5)
		fill(t, l, 100, time.Now())
		if _, err := l.ApplyRetention(); err != nil {
			t.Fatal(err)
		}
		if l.OldestOffset() != 0 {
			t.Fatalf("floor 5 ignored: oldest %d", l.OldestOffset())
		}
		l.SetFloor(60)
		if _, err := l.ApplyRetention(); err != nil {
			t.Fatal(err)
		}
		st := l.Stats()
		if st.Oldest == 0 || st.Oldest > 60 {
			t.Fatalf("oldest %d with floor 60", st.Oldest)
		}
		l.SetFloor(l.NextOffset())
		if _, err := l.ApplyRetention(); err != nil {
			t.Fatal(err)
		}
		st = l.Stats()
		if st.Bytes > 6<<10+2<<10 || st.Segments < 1 {
			t.Fatalf("size retention: %+v", st)
		}
	})
	t.Run("background", func(t *testing.T) {
		l := openT(t, Config{Dir: t.TempDir(), Sync: SyncNone, SegmentBytes: 1 << 10, RetentionBytes: 2 << 10})
		fill(t, l, 50, time.Now())
		deadline := time.Now().Add(10 * time.Second)
		for l.Stats().Bytes > 4<<10 { // retention runs after each roll
			if time.Now().After(deadline) {
				t.Fatalf("background retention did not run: %+v", l.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

func TestReaderRacesWriter(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Sync: SyncNone, SegmentBytes: 8 << 10, Codec: CodecS2}
	l := openT(t, cfg)
	ro, err := OpenReadOnly(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.Append(context.Background(), Record{}); !errors.Is(err, ErrReadOnly) {
		t.Fatal(err)
	}
	const n = 2000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i += 4 {
			recs := make([]Record, 4)
			for j := range recs {
				recs[j].Value = fmt.Appendf(nil, "v%d", i+j)
			}
			if _, err := l.Append(context.Background(), recs...); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, lg := range []*Log{ro, l} {
		r, _ := lg.NewReader(0)
		for i := 0; i < n; i++ {
			rec, err := r.Next(ctx)
			if err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			if rec.Offset != uint64(i) || string(rec.Value) != fmt.Sprintf("v%d", i) {
				t.Fatalf("record %d: %d %q", i, rec.Offset, rec.Value)
			}
		}
		r.Close()
	}
	wg.Wait()
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Config{Dir: dir, MaxRecordBytes: 1000})
	if _, err := Open(Config{Dir: dir}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second writer: %v", err)
	}
	if _, err := l.Append(context.Background(), Record{Value: make([]byte, 2000)}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	if _, err := Open(Config{}); err == nil {
		t.Fatal("empty dir accepted")
	}
	if _, err := ParseCodec("lz4"); err == nil {
		t.Fatal("bad codec accepted")
	}
	for _, s := range []string{"group", "each", "none"} {
		if p, err := ParseSyncPolicy(s); err != nil || p.String() != s {
			t.Fatal(s, p, err)
		}
	}
	l.Close()
	if _, err := l.Append(context.Background(), Record{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if _, _, err := l.ReadRaw(0, 10); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	l2 := openT(t, Config{Dir: dir}) // lock released by Close
	l2.Close()
}

func TestAppendAsyncAndSync(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Config{Dir: dir, Sync: SyncEach})
	ctx := context.Background()
	var acks []*Ack
	for i := 0; i < 50; i++ {
		a, err := l.AppendAsync(ctx, Record{Value: []byte{byte(i)}}, Record{Value: []byte{byte(i), 1}})
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, a)
	}
	for i, a := range acks {
		<-a.Done()
		first, err := a.Wait(ctx)
		if err != nil || first != uint64(2*i) {
			t.Fatalf("ack %d: %d %v", i, first, err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, segName(0))); fi.Size() <= l.Stats().Bytes {
		t.Fatalf("no preallocated space: file %d bytes, data %d", fi.Size(), l.Stats().Bytes)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
	// Close trimmed the preallocated zeros.
	fi, _ := os.Stat(filepath.Join(dir, segName(0)))
	l2 := openT(t, Config{Dir: dir})
	if l2.NextOffset() != 100 || fi.Size() != l2.Stats().Bytes {
		t.Fatalf("next %d, file %d bytes, data %d", l2.NextOffset(), fi.Size(), l2.Stats().Bytes)
	}
}

func TestAppendCanceled(t *testing.T) {
	l := openT(t, Config{Dir: t.TempDir(), GroupInterval: time.Hour, GroupRecords: 1 << 20})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := l.Append(ctx, Record{Value: []byte("x")})
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	// Close still flushes it: the record was queued.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestGroupWithoutWait checks that a negative GroupInterval syncs without
// waiting for more records: with GroupRecords out of reach, a positive
// interval of an hour would hold this Append for that hour.
func TestGroupWithoutWait(t *testing.T) {
	l := openT(t, Config{Dir: t.TempDir(), GroupInterval: -1, GroupRecords: 1 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		off, err := l.Append(ctx, Record{Value: []byte("x")})
		if err != nil || off != uint64(i) {
			t.Fatalf("append %d: offset %d, %v", i, off, err)
		}
	}
}

// TestRecordTimeRange checks that times a batch could not store are
// refused before anything is written, and that extreme valid times mixed in
// one batch read back.
func TestRecordTimeRange(t *testing.T) {
	l := openT(t, Config{Dir: t.TempDir()})
	ctx := context.Background()
	for _, bad := range []time.Time{time.Date(1880, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if _, err := l.Append(ctx, Record{Value: []byte("x"), Time: bad}); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("time %v: got %v, want ErrInvalidRecord", bad, err)
		}
	}
	lo, hi := time.Unix(0, 1), time.Unix(0, 1<<62-1)
	if _, err := l.Append(ctx, Record{Value: []byte("lo"), Time: lo}, Record{Value: []byte("hi"), Time: hi}); err != nil {
		t.Fatal(err)
	}
	r, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, want := range []time.Time{lo, hi} {
		rec, err := r.Next(ctx)
		if err != nil || !rec.Time.Equal(want) {
			t.Fatalf("read %v, %v; want time %v", rec.Time, err, want)
		}
	}
}
