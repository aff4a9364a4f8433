package spool

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
)

func smallDisk(t *testing.T, size string) string { return testutil.SmallDisk(t, size) }

// TestFullDiskSmallerThanPreallocation: with less free space than the 4 MiB
// a segment preallocates, the spool still opens and takes records (it
// falls back to no preallocation); when the disk is full, Append fails
// with an error that names the real segment file, not a temporary one, and
// every acknowledged record reads back after a reopen. (Before: Open failed
// naming a ".tmp" file that did not exist, and no record was taken.)
func TestFullDiskSmallerThanPreallocation(t *testing.T) {
	// 2 MiB free: not enough for the first segment's zeros; 5 MiB free:
	// enough for them, not for the next chunk zero-filled in the background.
	for _, fill := range []int{4 << 20, 1 << 20} {
		t.Run(fmt.Sprintf("%d MiB free", 6-fill>>20), func(t *testing.T) { fullDisk(t, fill) })
	}
}

func fullDisk(t *testing.T, fill int) {
	disk := smallDisk(t, "6m")
	filler := filepath.Join(disk, "filler")
	if err := os.WriteFile(filler, make([]byte, fill), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(disk, "stream")
	cfg := Config{Dir: dir, Sync: SyncEach}
	l, err := Open(cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	value := make([]byte, 16<<10)
	var acked uint64
	var aerr error
	for range 2000 {
		if _, aerr = l.Append(context.Background(), Record{Value: value}); aerr != nil {
			break
		}
		acked++
	}
	l.Close()
	free := uint64(6<<20-fill) / uint64(len(value))
	if acked < free*3/4 {
		t.Fatalf("only %d records of 16 KiB taken where %d fit: %v", acked, free, aerr)
	}
	if aerr == nil {
		t.Fatal("2000 records of 16 KiB fit on a disk of 6 MiB")
	}
	t.Logf("%d records taken, then: %v", acked, aerr)
	if !errors.Is(aerr, syscall.ENOSPC) || strings.Contains(aerr.Error(), ".tmp") || !strings.Contains(aerr.Error(), segSuffix) {
		t.Fatalf("append on a full disk: %v; want ENOSPC naming the segment file", aerr)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	l, err = Open(cfg)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer l.Close()
	if got := readAll(t, l, 0); uint64(len(got)) < acked {
		t.Fatalf("read %d records, %d were acknowledged", len(got), acked)
	}
}

// TestFullDiskRefusesAppends: a full disk refuses appends with ErrNoSpace
// (and ENOSPC) before anything of them is written; the log is not broken:
// it serves every acknowledged record, refuses again while the disk is
// full, takes appends again once space returns (no reopen), and after a
// reopen holds exactly what was acknowledged, in order. (Before: the first
// write that met ENOSPC failed the log until it was reopened.) Small
// segments make the writer roll into spare segments reserved ahead.
func TestFullDiskRefusesAppends(t *testing.T) {
	for _, tc := range []struct {
		name    string
		segment int64
		codec   Codec
	}{
		{"default segments", 0, CodecNone},
		{"64 KiB segments zstd", 64 << 10, CodecZstd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk := smallDisk(t, "8m")
			filler := filepath.Join(disk, "filler")
			if err := os.WriteFile(filler, make([]byte, 5<<20), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg := Config{Dir: filepath.Join(disk, "stream"), SegmentBytes: tc.segment, Codec: tc.codec}
			l, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { l.Close() }()
			value := func(i int) []byte {
				v := make([]byte, 16<<10)
				r := rand.New(rand.NewPCG(uint64(i), 1))
				for j := 0; j < len(v); j += 8 { // incompressible
					binary.LittleEndian.PutUint64(v[j:], r.Uint64())
				}
				return v
			}
			ctx := context.Background()
			acked := 0
			var aerr error
			for i := 0; i < 2000; i++ {
				if _, aerr = l.Append(ctx, Record{Value: value(acked)}); aerr != nil {
					break
				}
				acked++
			}
			if aerr == nil {
				t.Fatal("2000 records of 16 KiB fit in 3 MiB")
			}
			if !errors.Is(aerr, ErrNoSpace) || !errors.Is(aerr, syscall.ENOSPC) {
				t.Fatalf("append on a full disk: %v; want ErrNoSpace and ENOSPC", aerr)
			}
			if acked < 100 {
				t.Fatalf("only %d records of 16 KiB taken in 3 MiB free", acked)
			}
			for range 5 { // refused again, not failed
				if _, err := l.Append(ctx, Record{Value: value(acked)}); !errors.Is(err, ErrNoSpace) {
					t.Fatalf("append while still full: %v; want ErrNoSpace", err)
				}
			}
			if err := l.Sync(); err != nil { // nothing to store: never refused
				t.Fatalf("sync on the full disk: %v", err)
			}
			check := func(l *Log, want int) {
				t.Helper()
				got := readAll(t, l, 0)
				if len(got) != want {
					t.Fatalf("read %d records, %d acknowledged", len(got), want)
				}
				for i, r := range got {
					if !bytes.Equal(r.Value, value(i)) {
						t.Fatalf("record %d differs from what was appended", i)
					}
				}
			}
			check(l, acked)
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			for range 50 {
				if _, err := l.Append(ctx, Record{Value: value(acked)}); err != nil {
					t.Fatalf("append once space returned, without a reopen: %v", err)
				}
				acked++
			}
			check(l, acked)
			if err := l.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			if spares, _ := filepath.Glob(filepath.Join(cfg.Dir, "spare-*")); len(spares) > 0 {
				t.Fatalf("spare segments left after Close: %v", spares)
			}
			if l, err = Open(cfg); err != nil {
				t.Fatalf("reopen: %v", err)
			}
			check(l, acked)
		})
	}
}

// TestFullDiskOpenWithTornTail: a log with a torn tail opens on a full
// disk and serves every acknowledged record (before: Open failed copying
// the torn tail into quarantine/, and the stream was not served at all);
// appends are refused while the disk is full; once space returns, the
// torn tail's copy reaches quarantine/ byte for byte, and appends succeed.
func TestFullDiskOpenWithTornTail(t *testing.T) {
	disk := smallDisk(t, "4m")
	cfg := Config{Dir: filepath.Join(disk, "stream"), RetentionInterval: 20 * time.Millisecond}
	l, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("v"), 1000)
	for range 500 {
		if _, err := l.Append(context.Background(), Record{Value: value}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A torn tail: half a batch's worth of bytes after the last batch.
	seg := filepath.Join(cfg.Dir, segName(0))
	torn := bytes.Repeat([]byte{0xA5, 0x5A, 0x01, 0x00}, 8<<10)
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(torn); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Fill the disk to the last block.
	testutil.FillDisk(t, disk)

	if l, err = Open(cfg); err != nil {
		t.Fatalf("open on a full disk with a torn tail: %v", err)
	}
	defer func() { l.Close() }()
	if got := readAll(t, l, 0); len(got) != 500 {
		t.Fatalf("read %d records, 500 acknowledged", len(got))
	}
	if _, err := l.Append(context.Background(), Record{Value: value}); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("append on the full disk: %v; want ErrNoSpace", err)
	}
	if err := os.Remove(filepath.Join(disk, "filler")); err != nil {
		t.Fatal(err)
	}
	var copies []string
	for end := time.Now().Add(10 * time.Second); len(copies) == 0; {
		if time.Now().After(end) {
			t.Fatal("the torn tail's copy did not reach quarantine/ once space returned")
		}
		time.Sleep(10 * time.Millisecond)
		copies, _ = filepath.Glob(filepath.Join(cfg.Dir, "quarantine", segName(0)+".torn-*"))
	}
	got, err := os.ReadFile(copies[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(got, torn) || len(got) > len(torn)+preallocStep {
		t.Fatalf("the copy holds %d bytes, not the torn tail of %d", len(got), len(torn))
	}
	if _, err := l.Append(context.Background(), Record{Value: value}); err != nil {
		t.Fatalf("append once space returned: %v", err)
	}
}
