package fsutil

import (
	"os"
	"syscall"
)

// Datasync flushes f's data and the metadata needed to read it back
// (fdatasync(2), retried on EINTR).
func Datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
