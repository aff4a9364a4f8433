package spool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// copyAll copies src into dst batch by batch, as a copy pulling with the
// fetch path would (ReadRaw, then AppendBatches), until dst holds all of src.
func copyAll(t *testing.T, src, dst *Log, maxBytes int) {
	t.Helper()
	ctx := context.Background()
	for from := dst.NextOffset(); from < src.NextOffset(); {
		data, next, err := src.ReadRaw(from, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dst.AppendBatches(ctx, data, from)
		if err != nil {
			t.Fatalf("AppendBatches at %d: %v", from, err)
		}
		if got != next {
			t.Fatalf("AppendBatches at %d returned %d, ReadRaw said %d", from, got, next)
		}
		from = next
	}
}

// sameBytes checks that dst serves exactly src's bytes for every offset.
func sameBytes(t *testing.T, src, dst *Log) {
	t.Helper()
	if src.NextOffset() != dst.NextOffset() {
		t.Fatalf("copy ends at %d, source at %d", dst.NextOffset(), src.NextOffset())
	}
	for from := uint64(0); from < src.NextOffset(); {
		a, next, err := src.ReadRaw(from, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		b, bnext, err := dst.ReadRaw(from, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		// Segments may roll at other places: compare batch by batch.
		n := min(len(a), len(b))
		if n == 0 || !bytes.Equal(a[:n], b[:n]) {
			t.Fatalf("at offset %d the copy serves other bytes", from)
		}
		if len(a) > len(b) {
			next = bnext
		}
		from = next
	}
	sa, sb := readAll(t, src, 0), readAll(t, dst, 0)
	for i := range sa {
		if err := sameRecord(sa[i], sb[i]); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
}

// TestAppendBatchesCopies: a log fed with another's raw batches holds the
// same batches at the same offsets, byte for byte (ids, times, headers,
// codecs), across segment rolls and a reopen, and takes its own appends
// after them.
func TestAppendBatchesCopies(t *testing.T) {
	for _, codec := range []Codec{CodecNone, CodecS2, CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			src := openT(t, Config{Dir: t.TempDir(), Codec: codec, SegmentBytes: 64 << 10})
			dcfg := Config{Dir: filepath.Join(t.TempDir(), "copy"), SegmentBytes: 48 << 10}
			dst, err := Open(dcfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i := range 40 {
				var recs []Record
				for j := range i%7 + 1 {
					recs = append(recs, Record{Value: bytes.Repeat([]byte{byte(i), byte(j)}, 100*(j+1)),
						Headers: []Header{{Key: "k", Value: []byte(fmt.Sprint(i, j))}}})
				}
				if _, err := src.Append(ctx, recs...); err != nil {
					t.Fatal(err)
				}
				if i%9 == 0 {
					copyAll(t, src, dst, 3000)
				}
			}
			copyAll(t, src, dst, 3000)
			sameBytes(t, src, dst)
			if err := dst.Close(); err != nil {
				t.Fatal(err)
			}
			if dst, err = Open(dcfg); err != nil {
				t.Fatal(err)
			}
			defer dst.Close()
			sameBytes(t, src, dst)
			if _, err := src.Append(ctx, Record{Value: []byte("after the reopen")}); err != nil {
				t.Fatal(err)
			}
			copyAll(t, src, dst, 1<<20)
			sameBytes(t, src, dst)
		})
	}
}

// TestAppendBatchesRefuses: batches that do not start at the copy's next
// offset, or are damaged anywhere, are refused with nothing stored, and
// the copy goes on taking the right ones.
func TestAppendBatchesRefuses(t *testing.T) {
	src := openT(t, Config{Dir: t.TempDir()})
	dst := openT(t, Config{Dir: t.TempDir()})
	ctx := context.Background()
	for i := range 3 {
		if _, err := src.Append(ctx, Record{Value: []byte(fmt.Sprint("r", i))}); err != nil {
			t.Fatal(err)
		}
	}
	data, _, err := src.ReadRaw(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := src.ReadRaw(1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dst.AppendBatches(ctx, first, 1); !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("batches from 1 into an empty copy: %v, want ErrOffsetMismatch", err)
	}
	if _, err := dst.AppendBatches(ctx, data, 5); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("batches said to start at 5: %v, want ErrCorrupt", err)
	}
	for _, pos := range []int{0, 8, 20, batchHeaderLen + 2, len(data) - 1} {
		bad := bytes.Clone(data)
		bad[pos] ^= 0x40
		if _, err := dst.AppendBatches(ctx, bad, 0); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a byte flipped at %d: %v, want ErrCorrupt", pos, err)
		}
	}
	if _, err := dst.AppendBatches(ctx, data[:len(data)-3], 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a cut batch: %v, want ErrCorrupt", err)
	}
	if n := dst.NextOffset(); n != 0 {
		t.Fatalf("refused batches stored: next offset %d", n)
	}
	if next, err := dst.AppendBatches(ctx, data, 0); err != nil || next != 3 {
		t.Fatalf("the right batches: %d, %v", next, err)
	}
	sameBytes(t, src, dst)
	// Concurrent appends of its own between copied batches keep order.
	done := make(chan error, 1)
	go func() {
		_, err := dst.Append(ctx, Record{Value: []byte("own")})
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := dst.AppendBatches(ctx, data, 0); !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("batches already held: %v, want ErrOffsetMismatch", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := dst.Wait(wctx, 3); err != nil {
		t.Fatal(err)
	}
}

// TestAppendBatchesReturnsOwnership: AppendBatches returns only once the
// writer no longer reads data, also when ctx ends first, so a caller that
// reuses its buffer at once never has scribbled bytes stored.
func TestAppendBatchesReturnsOwnership(t *testing.T) {
	src := openT(t, Config{Dir: t.TempDir()})
	dst := openT(t, Config{Dir: t.TempDir(), Sync: SyncEach})
	ctx := context.Background()
	for i := range 300 {
		if _, err := src.Append(ctx, Record{Value: bytes.Repeat([]byte{byte(i)}, 500)}); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 0, 1<<20)
	for from := uint64(0); from < src.NextOffset(); {
		data, _, err := src.ReadRaw(from, 2000)
		if err != nil {
			t.Fatal(err)
		}
		buf = append(buf[:0], data...)
		cctx, cancel := context.WithTimeout(ctx, time.Duration(from%3)*time.Microsecond)
		_, err = dst.AppendBatches(cctx, buf, from)
		cancel()
		for i := range buf {
			buf[i] = 0xEE // the caller reuses its buffer at once
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrOffsetMismatch) {
			t.Fatal(err)
		}
		if err := dst.Sync(); err != nil { // what was queued is now written
			t.Fatal(err)
		}
		from = dst.NextOffset()
	}
	sameBytes(t, src, dst)
}
