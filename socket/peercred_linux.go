package socket

import (
	"net"
	"os"
	"syscall"
)

// peerProcess is the process at the other end of c: over a unix socket,
// what the kernel reports (SO_PEERCRED); over inproc, this process; nil
// otherwise.
func peerProcess(c net.Conn) *PeerProcess {
	if isMemConn(c) {
		return &PeerProcess{PID: os.Getpid(), UID: os.Getuid(), GID: os.Getgid()}
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil
	}
	var cred *syscall.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return nil
	}
	return &PeerProcess{PID: int(cred.Pid), UID: int(cred.Uid), GID: int(cred.Gid)}
}
