package discovery

import (
	"io/fs"
	"os"
	"strings"
)

// Reachable returns the endpoints of eps, an instance's advertised
// endpoints, that a socket on this host should connect to.
//
// An ipc endpoint names a unix socket file, which only a process that
// sees the file can reach: the instance runs on this host, or shares the
// directory. An ipc endpoint counts as reachable when its path exists
// here and is a socket. When some are, Reachable returns those alone, so
// that the instance gets one connection, over the cheaper transport (a
// round trip over a unix socket takes less CPU and less time than one
// over tcp loopback). Otherwise it returns eps without their ipc endpoints,
// which a socket here would dial in vain. eps itself is returned when it
// has no ipc endpoint.
func Reachable(eps []string) []string {
	var local, other []string
	hasIPC := false
	for _, ep := range eps {
		path, ok := strings.CutPrefix(ep, "ipc://")
		if !ok {
			other = append(other, ep)
			continue
		}
		hasIPC = true
		if st, err := os.Stat(path); err == nil && st.Mode().Type() == fs.ModeSocket {
			local = append(local, ep)
		}
	}
	switch {
	case len(local) > 0:
		return local
	case !hasIPC:
		return eps
	}
	return other
}
