//go:build !linux

package fsutil

import "os"

// Datasync flushes f (fsync where fdatasync is not available).
func Datasync(f *os.File) error { return f.Sync() }
