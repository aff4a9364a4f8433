//go:build !unix

package socket

import "net"

// rawTryWrite returns nil: no non-blocking write here, so TCP and IPC
// peers never write directly.
func rawTryWrite(c net.Conn) func(b []byte) (int, error) { return nil }
