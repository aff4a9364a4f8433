//go:build unix

package tail

import (
	"os"
	"syscall"
)

// identify returns the device and inode numbers and the link count of fi.
// ok is false when the platform does not expose them.
func identify(fi os.FileInfo) (id fileID, nlink uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, 0, false
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}, uint64(st.Nlink), true
}
