package testutil

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// SmallDisk mounts a tmpfs of size (as mount's size= option: "6m") on a
// new directory and unmounts it when the test ends. It skips the test
// where mounting is not permitted (it needs root or CAP_SYS_ADMIN), and
// fails it there when FASTMQ_SMALLDISK_REQUIRED is set (CI).
func SmallDisk(t testing.TB, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		if os.Getenv("FASTMQ_SMALLDISK_REQUIRED") != "" {
			t.Fatalf("cannot mount a small tmpfs to fill: %v", err)
		}
		t.Skipf("cannot mount a small tmpfs to fill (needs root or CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// FillDisk writes a file named filler into dir until its disk is full and
// returns the file's path.
func FillDisk(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			return path
		}
	}
}
