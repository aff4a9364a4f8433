//go:build unix

package socket

import (
	"errors"
	"net"
	"syscall"
)

// rawTryWrite returns a write to c's file descriptor that never waits
// for room (a non-blocking write(2)), or nil if c has no descriptor. The
// function it returns is not safe for concurrent use.
func rawTryWrite(c net.Conn) func(b []byte) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var (
		buf  []byte
		n    int
		werr error
	)
	f := func(fd uintptr) bool {
		for {
			n, werr = syscall.Write(int(fd), buf)
			if !errors.Is(werr, syscall.EINTR) {
				break
			}
		}
		if errors.Is(werr, syscall.EAGAIN) {
			n, werr = 0, nil
		}
		n = max(n, 0)
		return true // never wait for room
	}
	return func(b []byte) (int, error) {
		buf = b
		err := rc.Write(f)
		buf = nil
		if err != nil {
			return 0, err
		}
		return n, werr
	}
}
