package fastmq

import (
	"errors"
	"strings"

	"github.com/fastmq/fastmq/internal/netaddr"
	"github.com/fastmq/fastmq/internal/nodesec"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
)

// ErrMixedMesh reports a peer this node cannot connect to securely: a
// CURVE node and a peer that advertises no CURVE key, a node without keys
// and a CURVE peer, or a CURVE peer whose key nothing vouches for (gossip
// without Config.Key, and a key not pinned in CurveTrusted or CurveAllow).
// The node's sockets report it in their events and logs and do not
// connect to that peer.
var ErrMixedMesh = nodesec.ErrMixedMesh

// loadSecurity resolves the CURVE settings of cfg (package nodesec).
func loadSecurity(cfg *Config) (*nodesec.Security, error) {
	return nodesec.New(nodesec.Config{CurveKey: cfg.CurveKey, CurveKeyFile: cfg.CurveKeyFile, CurveTrusted: cfg.CurveTrusted,
		CurveAllow: cfg.CurveAllow, ACL: cfg.ACL, GossipEncrypted: cfg.Key != nil, Socket: cfg.Socket})
}

// authorizeGroup is the group server's Authorize, by the spool server's
// ACL: a member's requests and dead letters need a read grant of the
// stream, listing and info a list grant, seek and replay an admin grant.
func (n *Node) authorizeGroup(env [][]byte, access group.Access, stream, _ string) error {
	acl := pull.ACLRead
	switch access {
	case group.AccessList:
		acl = pull.ACLList
	case group.AccessAdmin:
		acl = pull.ACLAdmin
	}
	if n.server.AllowedOp(env, acl, stream) {
		return nil
	}
	return errors.New(pull.ForbiddenOpMessage(acl, stream))
}

// memberLimit is the group server's MemberLimit, by the spool server's
// ACL: its "limit members" lines.
func (n *Node) memberLimit(env [][]byte, stream, _ string) int {
	return n.server.MemberLimit(env, stream)
}

// CurvePublicKey returns the node's CURVE public key, which it gossips
// (the zero key for a node without keys).
func (n *Node) CurvePublicKey() socket.CurveKey { return n.sec.Public() }

// ClientSocketConfig returns cfg as the node's own client sockets use it,
// for a socket a program connects to mesh peers itself (group.Info, say):
// with a node key, a CURVE client with the node's key pair that uses the
// key each peer's node gossips (Config.CurveKey); without one, a socket
// that refuses, as clearly, peers that advertise a key. cfg is returned as
// it is when it sets PLAIN or CURVE itself.
func (n *Node) ClientSocketConfig(cfg socket.Config) socket.Config { return n.sec.ClientSocket(cfg) }

// ServerSocketConfig returns cfg as the node's own served sockets use it
// (see Serve): with a node key, a CURVE server with it for the clients
// the node trusts. cfg is returned as it is when it sets PLAIN or CURVE
// itself, or the node has no key.
func (n *Node) ServerSocketConfig(cfg socket.Config) socket.Config { return n.sec.ServerSocket(cfg) }

// SpoolOpen reports whether the node's spool server is open to the
// network: the node gossips beyond loopback, its spool server listens on
// tcp beyond loopback, and it has neither a CURVE key (Config.CurveKey,
// CurveKeyFile) nor an ACL (Config.ACL), so any client that reaches the
// port reads every stream, dead letters included, and probes stream
// names. New logs it at WARN.
func (n *Node) SpoolOpen() bool {
	if n.sec.Enabled() || n.cfg.ACL != nil || netaddr.IsLoopback(netaddr.HostOf(n.GossipAddr())) {
		return false
	}
	for _, ep := range n.server.Endpoints() {
		if addr, ok := strings.CutPrefix(ep, "tcp://"); ok && !netaddr.IsLoopback(netaddr.HostOf(addr)) {
			return true
		}
	}
	return false
}
