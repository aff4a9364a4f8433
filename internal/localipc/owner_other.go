//go:build !unix

package localipc

import "os"

// ownerOf returns the uid that owns the file st describes: not known
// here.
func ownerOf(os.FileInfo) (int, bool) { return 0, false }

// supported: twins are not used here (Windows' unix sockets, and
// systems without them).
const supported = false
