package spool

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
)

// TestReaderReuseBuffer reads a log of many read chunks with a Reader that
// reuses its buffer: every record comes back whole and in order (checked
// as it is returned, before the next Next may overwrite it), and reading
// allocates no buffer per read once the buffer is as large as the
// largest read (without ReuseBuffer, each read of up to 256 KiB is a new
// allocation).
func TestReaderReuseBuffer(t *testing.T) {
	l := openT(t, Config{Dir: filepath.Join(t.TempDir(), "s"), Codec: CodecNone, Sync: SyncNone})
	const n = 20000 // about 6.5 MiB: 25 reads of 256 KiB
	want := make([]Record, n)
	for i := range want {
		want[i] = Record{Value: fmt.Appendf(nil, "record %06d %0300d", i, i)}
		if i%7 == 0 {
			want[i].Headers = []Header{{Key: "k", Value: fmt.Appendf(nil, "h%d", i)}}
		}
	}
	for i := 0; i < n; i += 500 {
		if _, err := l.Append(context.Background(), want[i:i+500]...); err != nil {
			t.Fatal(err)
		}
	}
	read := func(reuse bool) uint64 {
		r, err := l.NewReader(0)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if reuse {
			r.ReuseBuffer()
		}
		// The first read sizes the buffer; count from the second chunk.
		for range n / 4 {
			if _, err := r.Next(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := n / 4; i < n; i++ {
			rec, err := r.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if rec.Offset != uint64(i) || string(rec.Value) != string(want[i].Value) || len(rec.Headers) != len(want[i].Headers) ||
				(len(rec.Headers) == 1 && string(rec.Headers[0].Value) != string(want[i].Headers[0].Value)) {
				t.Fatalf("record %d: got offset %d value %q headers %v", i, rec.Offset, rec.Value, rec.Headers)
			}
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	plain, reused := read(false), read(true)
	// The records counted span about 4.9 MiB of the log: read in new
	// buffers, that much is allocated; reused, the headers' slices
	// (small) and at most a few buffers of up to 256 KiB as the buffer
	// grows to the largest read.
	t.Logf("bytes allocated reading %d records: %d, with ReuseBuffer %d", n-n/4, plain, reused)
	if reused > 1<<20 {
		t.Errorf("with ReuseBuffer: %d bytes allocated reading %d records, want under 1 MiB", reused, n-n/4)
	}
	if plain < 4<<20 {
		t.Errorf("without ReuseBuffer: %d bytes allocated, want the 4.9 MiB read", plain)
	}
}
