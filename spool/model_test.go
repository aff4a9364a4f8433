package spool

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// TestModel runs random appends, reopens (changing codec, policy and segment
// size), reads and seeks against an in-memory model of the log.
func TestModel(t *testing.T) {
	steps := 300
	if os.Getenv("FASTMQ_LONG") != "" {
		steps = 5000
	}
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	var model [][]byte
	var times []time.Time
	t0 := time.Unix(1_600_000_000, 0)
	cfg := func() Config {
		return Config{Dir: dir, Codec: Codec(rng.IntN(3)), Sync: SyncPolicy(rng.IntN(3)),
			SegmentBytes: int64(512 + rng.IntN(8<<10)), GroupInterval: 50 * time.Microsecond, MaxRecordBytes: 64 << 10}
	}
	l, err := Open(cfg())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { l.Close() }()
	ctx := context.Background()
	for step := 0; step < steps; step++ {
		switch op := rng.IntN(10); {
		case op < 6:
			recs := make([]Record, 1+rng.IntN(20))
			for i := range recs {
				v := make([]byte, rng.IntN(3000))
				for j := range v {
					v[j] = byte(rng.IntN(4)) // compressible
				}
				recs[i] = Record{Value: v, Time: t0.Add(time.Duration(len(model)+i) * time.Millisecond)}
			}
			first, err := l.Append(ctx, recs...)
			if err != nil || first != uint64(len(model)) {
				t.Fatalf("step %d: append: %d %v (model %d)", step, first, err, len(model))
			}
			for _, r := range recs {
				model = append(model, r.Value)
				times = append(times, r.Time)
			}
		case op < 7:
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if l, err = Open(cfg()); err != nil {
				t.Fatalf("step %d: reopen: %v", step, err)
			}
			if l.NextOffset() != uint64(len(model)) {
				t.Fatalf("step %d: reopened at %d, model %d", step, l.NextOffset(), len(model))
			}
		case op < 9 && len(model) > 0:
			from := uint64(rng.IntN(len(model)))
			data, next, err := l.ReadRaw(from, rng.IntN(20000))
			if err != nil || next <= from {
				t.Fatalf("step %d: ReadRaw(%d): next %d, %v", step, from, next, err)
			}
			want := from
			err = DecodeBatches(data, from, 0, func(r Record) error {
				if r.Offset != want || !bytes.Equal(r.Value, model[r.Offset]) || !r.Time.Equal(times[r.Offset]) {
					t.Fatalf("step %d: offset %d (want %d) differs", step, r.Offset, want)
				}
				want++
				return nil
			})
			if err != nil || want != next {
				t.Fatalf("step %d: decode: %v, ended at %d, next %d", step, err, want, next)
			}
		case len(model) > 0:
			i := rng.IntN(len(model))
			got, err := l.SeekTime(times[i])
			if err != nil || got != uint64(i) {
				t.Fatalf("step %d: SeekTime -> %d, %v; want %d", step, got, err, i)
			}
		}
	}
	l.Close()
	if rep, err := Verify(dir); err != nil || !rep.Clean() || rep.Records != uint64(len(model)) {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}
