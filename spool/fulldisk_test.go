package spool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// smallDisk mounts a tmpfs of size bytes on a new directory and unmounts it
// when the test ends; it skips the test where mounting is not permitted.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root or CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

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
