// Package netaddr resolves a fastmq node's default network addresses:
// the gossip bind address and the spool server's endpoints, from the
// seeds it joins, so that the defaults work across hosts or fail clearly.
package netaddr

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/fastmq/fastmq/discovery"
)

// Addrs are the addresses of a node (the fields of fastmq.Config of the
// same names) that Resolve fills in.
type Addrs struct {
	Gossip         string // GossipAddr
	Advertise      string // AdvertiseAddr
	Seeds          []string
	SpoolEndpoints []string
	SpoolAdvertise string
}

// Resolve fills in the gossip address and the spool endpoints that a
// leaves empty, so that the defaults work across hosts or fail clearly:
//
//   - With no Seeds, or only seeds on loopback, gossip binds 127.0.0.1:0.
//   - With a seed on another host, gossip binds the address of the local
//     interface that routes to it (port 0: others learn it by gossip), so
//     the node never advertises loopback to a remote mesh; an explicit
//     loopback GossipAddr with such a seed and no AdvertiseAddr is refused.
//   - The spool server binds the gossip host (port 0), or every interface
//     when gossip binds every interface; an explicit loopback spool
//     endpoint on a node that gossips beyond loopback, with no
//     SpoolAdvertise, is refused: remote consumers could not reach it.
//
// The gossip timers follow the bind address (discovery.ProfileAuto).
func Resolve(a Addrs) (Addrs, error) {
	cfg := &a
	remote := remoteSeed(cfg.Seeds)
	switch {
	case cfg.Gossip == "" && remote == "":
		cfg.Gossip = "127.0.0.1:0"
	case cfg.Gossip == "":
		ip, err := routeTo(remote)
		if err != nil {
			return a, fmt.Errorf("fastmq: find the local address that reaches seed %s: %w; set GossipAddr", remote, err)
		}
		cfg.Gossip = net.JoinHostPort(ip, "0")
	case remote != "" && cfg.Advertise == "" && IsLoopback(HostOf(cfg.Gossip)):
		return a, fmt.Errorf("fastmq: gossip bound to loopback (%s) cannot be reached from seed %s on another host: set GossipAddr to this host's address, or AdvertiseAddr", cfg.Gossip, remote)
	}
	gossipHost := HostOf(cfg.Gossip)
	if cfg.Advertise != "" {
		gossipHost = HostOf(cfg.Advertise)
	}
	if len(cfg.SpoolEndpoints) == 0 {
		host := HostOf(cfg.Gossip)
		switch {
		case host == "" || IsLoopback(host):
			host = "127.0.0.1"
		case discovery.IsWildcard(host):
			host = "0.0.0.0"
		}
		cfg.SpoolEndpoints = []string{"tcp://" + net.JoinHostPort(host, "0")}
		return a, nil
	}
	if cfg.SpoolAdvertise == "" && gossipHost != "" && !IsLoopback(gossipHost) {
		if ep := cfg.SpoolEndpoints[0]; strings.HasPrefix(ep, "tcp://") && IsLoopback(HostOf(strings.TrimPrefix(ep, "tcp://"))) {
			return a, fmt.Errorf("fastmq: spool endpoint %s is on loopback while the node gossips on %s: remote consumers could not reach it; bind SpoolEndpoints to this host's address, or set SpoolAdvertise", ep, gossipHost)
		}
	}
	return a, nil
}

// remoteSeed returns the first seed that is not on loopback, or "".
func remoteSeed(seeds []string) string {
	for _, s := range seeds {
		if h := HostOf(s); h != "" && !IsLoopback(h) {
			return s
		}
	}
	return ""
}

// routeTo returns the local address the kernel would send from to reach
// addr. It sends nothing: connecting a UDP socket only picks the route.
func routeTo(addr string) (string, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	ua, ok := c.LocalAddr().(*net.UDPAddr)
	if !ok || ua.IP == nil {
		return "", errors.New("no local address")
	}
	return ua.IP.String(), nil
}

// HostOf returns the host of "host:port", or "" if addr is not one.
func HostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return h
}

// IsLoopback reports whether host is "localhost" or a loopback address.
func IsLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}
