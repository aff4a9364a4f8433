//go:build !linux

package group

import "os"

// datasync flushes f (fsync where fdatasync is not available).
func datasync(f *os.File) error { return f.Sync() }
