//go:build !linux

package bench

import "os"

// datasync is fsync where fdatasync is missing, as in the spool.
func datasync(f *os.File) error { return f.Sync() }
