package bench

import (
	"os"
	"syscall"
)

// datasync is fdatasync(2), as the spool's group commit does it.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
