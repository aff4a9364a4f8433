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
// costs no allocation per chunk once the buffer is as large as the
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
	read := func(reuse bool) float64 {
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
		return float64(after.Mallocs - before.Mallocs)
	}
	plain, reused := read(false), read(true)
	// Headers are allocated per record that has them (n/7 of them, 3/4
	// of which are counted): the same with and without reuse.
	headers := float64((n - n/4) / 7)
	t.Logf("allocations reading %d records: %.0f, with ReuseBuffer %.0f", n-n/4, plain, reused)
	if reused > headers+4 {
		t.Errorf("with ReuseBuffer: %.0f allocations reading %d records, want at most %.0f (the headers' and a few buffers')", reused, n-n/4, headers+4)
	}
	if plain < headers+12 {
		t.Errorf("without ReuseBuffer: %.0f allocations, want one per read chunk beyond the headers' %.0f", plain, headers)
	}
}
