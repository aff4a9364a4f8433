// Package localipc gives a tcp endpoint a process listens on a unix socket
// twin on the same host, so that clients on that host can reach it without
// tcp loopback.
//
// The twin of tcp://HOST:PORT is the socket file tcp-HOST-PORT-nNET.sock
// in a directory (DefaultDir unless configured), where NET names the
// network namespace (Linux; elsewhere the name has no -nNET): a twin
// stands for an address in one network. Nothing about it is advertised:
// a client that learns an instance's tcp endpoint looks for the twin in
// its own directory (Find), which only a process of the same user on the
// same host can have made, and uses it when it is there. Two live
// listeners cannot hold one HOST:PORT in a network, so a twin stands for
// one listener; a twin left by a process that died is replaced when the
// endpoint is bound again, and a client that cannot connect to a twin
// goes back to tcp.
//
// The directory must be private: owned by the process's user and
// writable by nobody else. Whoever can create files in it could stand in
// for any server, so Prepare and Find refuse a directory that is not.
package localipc

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/fastmq/fastmq/discovery"
)

// maxPath bounds a socket path: sun_path holds 108 bytes on Linux and 104
// on the BSDs and macOS, the terminating NUL included.
const maxPath = 103

// DefaultDir is the directory of twins when none is configured:
// fastmq-<uid> in os.TempDir(), uid the effective one.
func DefaultDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("fastmq-%d", os.Geteuid()))
}

// Supported reports whether twins are used on this system: on unix
// systems (see supported).
func Supported() bool { return supported }

// nameSafe maps the characters of a host that do not belong in a file
// name (IPv6 colons, zone marks, separators) to '_'.
var nameSafe = strings.NewReplacer(":", "_", "%", "_", "/", "_", "\\", "_")

// Path returns the twin's path in dir for ep, and false when ep is no
// tcp endpoint with a host and a port from 1 to 65535, or the path would
// be too long for a unix socket. A wildcard host (0.0.0.0, ::, *) is
// named "any": such a listener takes connections to every address of the
// host (see Find).
func Path(dir, ep string) (string, bool) {
	rest, ok := strings.CutPrefix(ep, "tcp://")
	if !ok {
		return "", false
	}
	host, portStr, err := net.SplitHostPort(rest)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil || port < 1 || port > 65535 || host == "" || host == "." || host == ".." {
		return "", false
	}
	if discovery.IsWildcard(host) {
		host = "any"
	}
	return pathOf(dir, nameSafe.Replace(host), port)
}

// pathOf names the twin of host (made safe) and port in dir.
func pathOf(dir, host string, port int) (string, bool) {
	if !filepath.IsAbs(dir) {
		return "", false
	}
	p := filepath.Join(dir, "tcp-"+host+"-"+strconv.Itoa(port)+netSuffix()+".sock")
	// Nothing in the name may lead out of dir.
	if len(p) > maxPath || filepath.Dir(p) != filepath.Clean(dir) {
		return "", false
	}
	return p, true
}

// localHost reports whether h is an address of this host in this
// network namespace (loopback included), where a listener on every
// address takes connections.
func localHost(h string) bool {
	ip := net.ParseIP(h)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// netSuffix names the process's network namespace where there are such
// ("-n" and the namespace's inode number on Linux, "" elsewhere): a twin
// stands for an endpoint in one network, and processes in two namespaces
// that share a directory may each have a listener at one address.
var netSuffix = sync.OnceValue(func() string {
	l, err := os.Readlink("/proc/self/ns/net") // "net:[4026531840]"
	if err != nil {
		return ""
	}
	id, ok := strings.CutPrefix(l, "net:[")
	id, ok2 := strings.CutSuffix(id, "]")
	if !ok || !ok2 || id == "" {
		return ""
	}
	return "-n" + id
})

// Prepare makes dir with mode 0700 if it is missing and checks that it
// is private (see Private).
func Prepare(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("localipc: %s is not an absolute path", dir)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("localipc: %w", err)
	}
	return Private(dir)
}

// Private returns an error unless dir is a directory, not a symbolic
// link, owned by this process's user, that neither its group nor others
// may write to.
func Private(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("localipc: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("localipc: %s is not a directory", dir)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("localipc: %s is writable by others (mode %v)", dir, st.Mode().Perm())
	}
	if uid, ok := ownerOf(st); ok && uid != os.Geteuid() {
		return fmt.Errorf("localipc: %s belongs to uid %d, not to this process's %d", dir, uid, os.Geteuid())
	}
	return nil
}

// Find returns the ipc endpoint of the twin of one of eps in dir, and
// the endpoint of eps it stands for: the first whose socket file is there
// (a socket, not a symbolic link). The twin of an endpoint whose host is
// an address of this host is also that of a listener on every address
// at its port (gossip gives such a listener's endpoint the address the
// node gossips from). ok is false when there is none or dir is not
// private.
func Find(dir string, eps []string) (twin, of string, ok bool) {
	if !Supported() || Private(dir) != nil {
		return "", "", false
	}
	for _, ep := range eps {
		p, ok := Path(dir, ep)
		if !ok {
			continue
		}
		if isSocket(p) {
			return "ipc://" + p, ep, true
		}
		host, port, _ := net.SplitHostPort(strings.TrimPrefix(ep, "tcp://"))
		n, _ := strconv.Atoi(port)
		// The file first: listing the interfaces costs more.
		if p, ok := pathOf(dir, "any", n); ok && !discovery.IsWildcard(host) && isSocket(p) && localHost(host) {
			return "ipc://" + p, ep, true
		}
	}
	return "", "", false
}

// isSocket reports whether p is a socket file (not a link to one).
func isSocket(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.Mode().Type() == fs.ModeSocket
}
