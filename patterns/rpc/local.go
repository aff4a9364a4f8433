package rpc

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/socket"
)

// Same-host clients. A server advertised in the mesh also listens on a
// unix socket (ServerConfig.NoLocalIPC), advertised after its other
// endpoints; a client that sees the socket file connects there alone
// (discovery.Reachable), others ignore it.

// localPrefix and localSuffix frame the name of a server's unix socket:
// rpc-<24 hex digits>.sock, random, so that a file of that name stands
// for one server only.
const (
	localPrefix = "rpc-"
	localSuffix = ".sock"
)

// maxPrune bounds the leftover sockets a server start looks at.
const maxPrune = 64

// advertise advertises the service with s.eps, after adding the unix
// socket for clients on this host when the configuration allows one. An
// advertisement too large for the gossip tags with it goes out without.
func (s *Server) advertise() error {
	local := ""
	if !s.cfg.NoLocalIPC && s.cfg.Socket.Authenticator == nil {
		ep, err := s.bindLocal()
		if err != nil {
			s.log.Warn("rpc server: no unix socket for clients on this host", "err", err)
		} else {
			local = ep
			s.eps = append(s.eps, ep)
		}
	}
	svc := discovery.Service{Name: s.cfg.Service, Kind: socket.Router.String(), Endpoints: s.eps}
	err := s.cfg.Discovery.Advertise(svc)
	if err != nil && local != "" && errors.Is(err, discovery.ErrTagsTooLarge) {
		s.log.Warn("rpc server: the unix socket does not fit in the advertisement; clients on this host use the other endpoints", "err", err)
		s.eps = s.eps[:len(s.eps)-1]
		_ = s.sock.Unbind(local)
		svc.Endpoints = s.eps
		err = s.cfg.Discovery.Advertise(svc)
	}
	return err
}

// bindLocal binds the server's socket to a new unix socket in the local
// directory and returns its endpoint.
func (s *Server) bindLocal() (string, error) {
	if runtime.GOOS == "windows" {
		return "", errors.New("unix sockets are not used on windows")
	}
	dir, err := localDir(s.cfg.LocalIPCDir)
	if err != nil {
		return "", err
	}
	pruneLocal(dir)
	var b [12]byte
	_, _ = rand.Read(b[:])
	ep := "ipc://" + filepath.Join(dir, localPrefix+hex.EncodeToString(b[:])+localSuffix)
	if _, err := s.sock.Bind(ep); err != nil {
		return "", err
	}
	return ep, nil
}

// localDir returns the directory for unix sockets, dir or the default,
// made if missing, after checking that only this process's user may
// create files in it: whoever can put a socket file of the name a server
// advertised stands in for that server.
func localDir(dir string) (string, error) {
	if dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("fastmq-%d", os.Getuid()))
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("%s is writable by others (mode %v)", dir, st.Mode().Perm())
	}
	if uid, ok := ownerOf(st); ok && uid != os.Getuid() {
		return "", fmt.Errorf("%s belongs to uid %d, not to this process's %d", dir, uid, os.Getuid())
	}
	return dir, nil
}

// pruneLocal removes the sockets in dir that servers left when they died
// (nobody listens on them), looking at maxPrune at most.
func pruneLocal(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	n := 0
	for _, e := range ents {
		name := e.Name()
		if e.Type() != os.ModeSocket || !strings.HasPrefix(name, localPrefix) || !strings.HasSuffix(name, localSuffix) {
			continue
		}
		if n++; n > maxPrune {
			return
		}
		p := filepath.Join(dir, name)
		c, err := net.DialTimeout("unix", p, 100*time.Millisecond)
		if err == nil {
			c.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			_ = os.Remove(p)
		}
	}
}
