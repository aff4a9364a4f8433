//go:build unix

package localipc

import (
	"os"
	"syscall"
)

// ownerOf returns the uid that owns the file st describes.
func ownerOf(st os.FileInfo) (int, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(sys.Uid), true
}

// supported: twins are used on unix systems.
const supported = true
