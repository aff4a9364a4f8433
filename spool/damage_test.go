package spool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// readToEnd reads from offset 0 with a Reader until Next fails or ctx ends,
// and returns the offsets read and the error that stopped it.
func readToEnd(ctx context.Context, l *Log) ([]uint64, error) {
	r, err := l.NewReader(0)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var got []uint64
	for {
		rec, err := r.Next(ctx)
		if err != nil {
			return got, err
		}
		got = append(got, rec.Offset)
	}
}

// TestReadOnlySeesDamageInLastSegment: damage inside the last segment with
// valid batches after it is damage for every reader, as it is for the
// writer (Open refuses it): the read-only Log serves the records before it,
// then Reader.Next, ReadRaw, Wait and Damage return a *CorruptError naming
// the same segment, byte and offset as Open's, instead of a clean end or
// waiting forever. Invalid bytes that nothing valid follows stay a torn
// tail: the end, not damage. (Before: Next waited at the damage for ever.)
func TestReadOnlySeesDamageInLastSegment(t *testing.T) {
	src := t.TempDir()
	buildLog(t, src, 12, 0, CodecNone)
	data, err := os.ReadFile(filepath.Join(src, segName(0)))
	if err != nil {
		t.Fatal(err)
	}
	bs := batchesOf(t, data)
	if len(bs) != 12 {
		t.Fatalf("%d batches", len(bs))
	}
	mid, last := bs[5], bs[len(bs)-1]
	mutate := func(f func(m []byte) []byte) []byte { return f(append([]byte(nil), data...)) }
	cases := []struct {
		name   string
		data   []byte
		damage bool // else a torn tail: the log ends at last.base (or mid.base)
		end    uint64
	}{
		{"flipped payload byte", mutate(func(m []byte) []byte { m[mid.pos+batchHeaderLen+3] ^= 0x40; return m }), true, mid.base},
		{"flipped header byte", mutate(func(m []byte) []byte { m[mid.pos+16] ^= 0x01; return m }), true, mid.base},
		{"length field grown", mutate(func(m []byte) []byte { m[mid.pos+1] ^= 0x01; return m }), true, mid.base},
		{"length field zeroed", mutate(func(m []byte) []byte { clear(m[mid.pos : mid.pos+4]); return m }), true, mid.base},
		{"bytes cut out of a batch", mutate(func(m []byte) []byte {
			return append(m[:mid.pos+batchHeaderLen+2], m[mid.pos+batchHeaderLen+12:]...)
		}), true, mid.base},
		{"zeroed sector", mutate(func(m []byte) []byte { clear(m[mid.pos : mid.pos+mid.size]); return m }), true, mid.base},
		{"torn last batch", mutate(func(m []byte) []byte { return m[:last.pos+last.size-3] }), false, last.base},
		{"zeroed tail", mutate(func(m []byte) []byte { clear(m[mid.pos:]); return append(m, make([]byte, 8192)...) }), false, mid.base},
		{"garbage tail", mutate(func(m []byte) []byte {
			for i := last.pos + 5; i < int64(len(m)); i++ {
				m[i] ^= 0x5a
			}
			return m
		}), false, last.base},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, segName(0)), tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			// The writer's verdict, on a copy.
			wdir := copyDir(t, dir)
			var werr *CorruptError
			wl, err := Open(Config{Dir: wdir})
			if err == nil {
				wl.Close()
			}
			if tc.damage != errors.As(err, &werr) {
				t.Fatalf("writer Open: %v; want damage %v", err, tc.damage)
			}

			l, err := OpenReadOnly(Config{Dir: dir})
			if err != nil {
				t.Fatalf("OpenReadOnly: %v", err)
			}
			defer l.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if !tc.damage {
				if err := l.Damage(); err != nil {
					t.Fatalf("Damage on a torn tail: %v", err)
				}
				if l.NextOffset() != tc.end {
					t.Fatalf("next %d, want %d", l.NextOffset(), tc.end)
				}
				checkValues(t, l, tc.end)
				if _, _, err := l.ReadRaw(tc.end, 1<<20); err != nil {
					t.Fatalf("ReadRaw at the end: %v", err)
				}
				return
			}
			got, err := readToEnd(ctx, l)
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("reader stopped with %v after %d records; want a CorruptError", err, len(got))
			}
			if uint64(len(got)) != tc.end {
				t.Fatalf("read %d records before the damage, want %d", len(got), tc.end)
			}
			if ce.Segment != werr.Segment || ce.Pos != werr.Pos || ce.Offset != werr.Offset || ce.Offset != tc.end || ce.Pos != mid.pos {
				t.Fatalf("reader: %v\nwriter: %v", ce, werr)
			}
			if err := l.Damage(); !errors.As(err, &ce) || ce.Offset != tc.end {
				t.Fatalf("Damage: %v", err)
			}
			if _, _, err := l.ReadRaw(tc.end, 1<<20); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ReadRaw at the damage: %v", err)
			}
			if _, _, err := l.ReadRaw(tc.end+3, 1<<20); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ReadRaw past the damage: %v", err)
			}
			if err := l.Wait(ctx, tc.end); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Wait at the damage: %v", err)
			}
			if err := l.Wait(ctx, tc.end-1); err != nil {
				t.Fatalf("Wait before the damage: %v", err)
			}
		})
	}
}

// TestFollowerWokenByDamage: a follower waiting at the end of the last
// segment, where more bytes then arrive that hold a damaged batch and a
// valid one after it, returns the damage instead of waiting for ever.
func TestFollowerWokenByDamage(t *testing.T) {
	src := t.TempDir()
	buildLog(t, src, 8, 0, CodecS2)
	data, err := os.ReadFile(filepath.Join(src, segName(0)))
	if err != nil {
		t.Fatal(err)
	}
	bs := batchesOf(t, data)
	cut := bs[4].pos
	dir := t.TempDir()
	p := filepath.Join(dir, segName(0))
	if err := os.WriteFile(p, data[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := OpenReadOnly(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, _ := l.NewReader(0)
	defer r.Close()
	for i := uint64(0); i < bs[4].base; i++ {
		if rec, err := r.Next(ctx); err != nil || rec.Offset != i {
			t.Fatalf("record %d: %v %v", i, rec.Offset, err)
		}
	}
	errc := make(chan error, 1)
	go func() {
		_, err := r.Next(ctx) // blocks at the end until the damage arrives
		errc <- err
	}()
	rest := append([]byte(nil), data[cut:]...)
	rest[batchHeaderLen+1] ^= 0xff // the fifth batch's payload
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(rest); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var ce *CorruptError
	if err := <-errc; !errors.As(err, &ce) || ce.Offset != bs[4].base || ce.Pos != bs[4].pos {
		t.Fatalf("follower: %v; want a CorruptError at offset %d byte %d", err, bs[4].base, bs[4].pos)
	}
}

// TestFollowerSeesNoDamageInALiveLog: a read-only follower of a writer that
// preallocates, writes batches of up to 200 KiB (so that a batch is often
// half visible) and rolls segments, reads every record once and in order
// and never takes a batch being written for damage.
func TestFollowerSeesNoDamageInALiveLog(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Sync: SyncGroup, GroupInterval: -1, SegmentBytes: 2 << 20}
	l := openT(t, cfg)
	ro, err := OpenReadOnly(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	const n = 400
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		r, _ := ro.NewReader(0)
		defer r.Close()
		for i := uint64(0); i < n; i++ {
			rec, err := r.Next(ctx)
			if err != nil {
				errc <- fmt.Errorf("record %d: %w", i, err)
				return
			}
			if rec.Offset != i || len(rec.Value) != int(i%7)*30<<10+1 {
				errc <- fmt.Errorf("record %d: offset %d, %d bytes", i, rec.Offset, len(rec.Value))
				return
			}
		}
		errc <- nil
	}()
	for i := 0; i < n; i++ {
		v := make([]byte, (i%7)*30<<10+1)
		v[0] = byte(i)
		if _, err := l.AppendAsync(ctx, Record{Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := ro.Damage(); err != nil {
		t.Fatal(err)
	}
}
