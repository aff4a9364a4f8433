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
	"runtime"
	"strings"
	"sync"
)

// maxPath bounds a socket path: sun_path holds 108 bytes on Linux and 104
// on the BSDs and macOS, the terminating NUL included.
const maxPath = 103

// DefaultDir is the directory of twins when none is configured:
// fastmq-<uid> in os.TempDir().
func DefaultDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("fastmq-%d", os.Getuid()))
}

// Supported reports whether twins are used on this system (not on
// Windows, whose unix sockets this package does not vouch for).
func Supported() bool { return runtime.GOOS != "windows" }

// nameSafe maps the characters of a host that do not belong in a file
// name (IPv6 colons, zone marks, separators) to '_'.
var nameSafe = strings.NewReplacer(":", "_", "%", "_", "/", "_", "\\", "_")

// Path returns the twin's path in dir for ep, and false when ep is no
// tcp endpoint with a host and a port, or the path would be too long for
// a unix socket.
func Path(dir, ep string) (string, bool) {
	rest, ok := strings.CutPrefix(ep, "tcp://")
	if !ok {
		return "", false
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil || host == "" || port == "" || port == "0" || port == "*" {
		return "", false
	}
	p := filepath.Join(dir, "tcp-"+nameSafe.Replace(host)+"-"+port+netSuffix()+".sock")
	if len(p) > maxPath || !filepath.IsAbs(p) {
		return "", false
	}
	return p, true
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
	if uid, ok := ownerOf(st); ok && uid != os.Getuid() {
		return fmt.Errorf("localipc: %s belongs to uid %d, not to this process's %d", dir, uid, os.Getuid())
	}
	return nil
}

// Find returns the ipc endpoint of the twin of one of eps in dir, and
// the endpoint of eps it stands for: the first whose socket file is there
// (a socket, not a symbolic link). ok is false when there is none or dir
// is not private.
func Find(dir string, eps []string) (twin, of string, ok bool) {
	if !Supported() || Private(dir) != nil {
		return "", "", false
	}
	for _, ep := range eps {
		p, ok := Path(dir, ep)
		if !ok {
			continue
		}
		if st, err := os.Lstat(p); err == nil && st.Mode().Type() == fs.ModeSocket {
			return "ipc://" + p, ep, true
		}
	}
	return "", "", false
}
