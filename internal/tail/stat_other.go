//go:build !unix

package tail

import "os"

// identify is not supported on this platform: every file has the zero
// identity, so rotation by rename is detected only while the file is open
// and restarts resume by path and fingerprint alone.
func identify(fi os.FileInfo) (id fileID, nlink uint64, ok bool) {
	return fileID{}, 1, false
}
