package fastmq

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
)

// ErrMixedMesh reports a peer this node cannot connect to securely: a
// CURVE node and a peer that advertises no CURVE key, a node without keys
// and a CURVE peer, or a CURVE peer whose key nothing vouches for (gossip
// without Config.Key, and a key not pinned in CurveTrusted or CurveAllow).
// The node's sockets report it in their events and logs and do not
// connect to that peer.
var ErrMixedMesh = errors.New("fastmq: cannot connect securely")

// nodeSecurity is a node's CURVE key pair and whom it trusts, resolved
// from its Config by New.
type nodeSecurity struct {
	members atomic.Pointer[discovery.Membership] // set by New once gossip runs
	public  socket.CurveKey
	secret  socket.CurveKey
	pinned  map[socket.CurveKey]bool // CurveTrusted, the CurveAllow file, and the node's own key
	dir     *socket.CurveKeyDir      // the CurveAllow directory; nil if none
	gossip  bool                     // gossip is encrypted: a key learnt there is trusted
	acl     *pull.ACL                // the spool server's ACL, the node's own key added; nil: none
	hooked  bool                     // a node without keys still checks peers (no PLAIN or CURVE of the caller's own)
	enabled bool                     // the node has a key pair
}

// loadSecurity resolves the CURVE settings of cfg.
func loadSecurity(cfg *Config) (*nodeSecurity, error) {
	sec := &nodeSecurity{pinned: map[socket.CurveKey]bool{}, gossip: cfg.Key != nil}
	secret := cfg.CurveKey
	if cfg.CurveKeyFile != "" {
		if !secret.IsZero() {
			return nil, errors.New("fastmq: both CurveKey and CurveKeyFile are set")
		}
		k, err := socket.LoadCurveSecretKey(cfg.CurveKeyFile)
		if err != nil {
			return nil, fmt.Errorf("fastmq: node key: %w", err)
		}
		secret = k
	}
	ownSecurity := hasSecurity(cfg.Socket)
	if secret.IsZero() {
		if len(cfg.CurveTrusted) > 0 || cfg.CurveAllow != "" {
			return nil, errors.New("fastmq: CurveTrusted or CurveAllow without a node key (CurveKey or CurveKeyFile)")
		}
		sec.hooked = !ownSecurity
		sec.acl = cfg.ACL
		return sec, nil
	}
	if ownSecurity {
		return nil, errors.New("fastmq: a node with a CURVE key sets the security of its sockets itself: Config.Socket must have no PLAIN or CURVE settings")
	}
	sec.enabled, sec.hooked = true, true
	sec.secret, sec.public = secret, socket.CurvePublicKey(secret)
	sec.pinned[sec.public] = true
	for _, k := range cfg.CurveTrusted {
		sec.pinned[k] = true
	}
	if cfg.CurveAllow != "" {
		st, err := os.Stat(cfg.CurveAllow)
		if err != nil {
			return nil, fmt.Errorf("fastmq: trusted keys: %w", err)
		}
		if st.IsDir() {
			d, err := socket.NewCurveKeyDir(cfg.CurveAllow)
			if err != nil {
				return nil, fmt.Errorf("fastmq: trusted keys: %w", err)
			}
			sec.dir = d
		} else {
			k, err := socket.LoadCurvePublicKey(cfg.CurveAllow)
			if err != nil {
				return nil, fmt.Errorf("fastmq: trusted keys: %w", err)
			}
			sec.pinned[k] = true
		}
	}
	if cfg.ACL != nil {
		// The node reads its own streams (its consumers pull from its own
		// spool server too).
		acl := &pull.ACL{Rules: append([]pull.ACLRule{{Client: sec.public.Z85(), Streams: []string{"*"}}}, cfg.ACL.Rules...)}
		sec.acl = acl
	}
	return sec, nil
}

// isPinned reports whether k is trusted without gossip.
func (s *nodeSecurity) isPinned(k socket.CurveKey) bool {
	if s.pinned[k] {
		return true
	}
	return s.dir != nil && s.dir.Authenticate(socket.AuthRequest{Mechanism: "CURVE", ClientKey: k}) == nil
}

// trusted reports whether k may be used: pinned, or learnt from encrypted
// gossip (advertised by a member that has not left).
func (s *nodeSecurity) trusted(k socket.CurveKey) bool {
	if s.isPinned(k) {
		return true
	}
	ms := s.members.Load()
	if !s.gossip || ms == nil {
		return false
	}
	z := k.Z85()
	for _, m := range ms.Members() {
		if m.CurveKey == z && m.Status != discovery.StatusLeft {
			return true
		}
	}
	return false
}

// Authenticate is the Authenticator of the node's CURVE servers: it
// accepts a client whose key the node trusts.
func (s *nodeSecurity) Authenticate(r socket.AuthRequest) error {
	if r.Mechanism != "CURVE" {
		return fmt.Errorf("%w: %s peer where a CURVE key is required", socket.ErrDenied, r.Mechanism)
	}
	if s.trusted(r.ClientKey) {
		return nil
	}
	if !s.gossip {
		return fmt.Errorf("%w: client key %s is not pinned (gossip is not encrypted, so only pinned keys are trusted)", socket.ErrDenied, r.ClientKey.Z85())
	}
	return fmt.Errorf("%w: client key %s is neither pinned nor advertised by a mesh member", socket.ErrDenied, r.ClientKey.Z85())
}

// serverKeyFor is the CurveServerKeyFor of the node's client sockets: the
// key advertised by the member that serves endpoint (or, for a node
// without keys, no key at all, refusing a CURVE peer).
func (s *nodeSecurity) serverKeyFor(endpoint string) (socket.CurveKey, error) {
	node, adv, found := s.advertised(endpoint)
	if !s.enabled {
		if found && adv != "" {
			return socket.CurveKey{}, fmt.Errorf("%w: peer %s at %s speaks CURVE (it advertises a public key) and this node has no key pair (Config.CurveKey or CurveKeyFile)", ErrMixedMesh, node, endpoint)
		}
		return socket.CurveKey{}, nil
	}
	switch {
	case !found:
		return socket.CurveKey{}, fmt.Errorf("%w: no mesh member advertises %s, so its CURVE key is unknown", ErrMixedMesh, endpoint)
	case adv == "":
		return socket.CurveKey{}, fmt.Errorf("%w: peer %s at %s advertises no CURVE key, and this node speaks only CURVE: give every node of the mesh a key pair", ErrMixedMesh, node, endpoint)
	}
	k, err := socket.ParseCurveKey(adv)
	if err != nil {
		return socket.CurveKey{}, fmt.Errorf("%w: peer %s at %s advertises a bad CURVE key: %v", ErrMixedMesh, node, endpoint, err)
	}
	if !s.gossip && !s.isPinned(k) {
		return socket.CurveKey{}, fmt.Errorf("%w: peer %s at %s advertises CURVE key %s, which is not pinned, and gossip without a key (Config.Key) proves nothing: add the key to CurveTrusted or CurveAllow", ErrMixedMesh, node, endpoint, adv)
	}
	return k, nil
}

// advertised returns the member that advertises endpoint (as its spool
// server or one of its services) and the CURVE key it advertises.
func (s *nodeSecurity) advertised(endpoint string) (node, key string, found bool) {
	ms := s.members.Load()
	if ms == nil {
		return "", "", false
	}
	for _, m := range ms.Members() {
		if m.Status == discovery.StatusLeft {
			continue
		}
		if m.Spool != nil && m.Spool.Endpoint == endpoint {
			return m.Name, m.CurveKey, true
		}
		for _, svc := range m.Services {
			for _, ep := range svc.Endpoints {
				if ep == endpoint {
					return m.Name, m.CurveKey, true
				}
			}
		}
	}
	return "", "", false
}

// serverSocket returns cfg for a socket the node serves: a CURVE server
// with the node's key, accepting the clients it trusts (and passing the
// caller's Authenticator too, if any), when the node has keys and cfg
// sets no security of its own.
func (s *nodeSecurity) serverSocket(cfg socket.Config) socket.Config {
	if !s.enabled || hasSecurity(cfg) {
		return cfg
	}
	cfg.CurveServer, cfg.CurveSecretKey = true, s.secret
	if cfg.Authenticator != nil {
		cfg.Authenticator = socket.AllOf(s, cfg.Authenticator)
	} else {
		cfg.Authenticator = s
	}
	return cfg
}

// clientSocket returns cfg for a socket the node connects: a CURVE client
// of each peer with its advertised key, with the node's key pair, when
// the node has keys (a node without keys refuses CURVE peers clearly),
// unless cfg sets security of its own.
func (s *nodeSecurity) clientSocket(cfg socket.Config) socket.Config {
	if !s.hooked || hasSecurity(cfg) {
		return cfg
	}
	cfg.CurveServerKeyFor = s.serverKeyFor
	if s.enabled {
		cfg.CurveSecretKey, cfg.CurvePublicKey = s.secret, s.public
	}
	return cfg
}

// hasSecurity reports whether cfg sets PLAIN or CURVE itself.
func hasSecurity(c socket.Config) bool {
	return c.PlainUsername != "" || c.PlainPassword != "" || c.PlainAuth != nil || c.CurveServer ||
		!c.CurveServerKey.IsZero() || !c.CurveSecretKey.IsZero() || c.CurveServerKeyFor != nil
}

// publicZ85 returns the public key to gossip, "" for a node without keys.
func (s *nodeSecurity) publicZ85() string {
	if !s.enabled {
		return ""
	}
	return s.public.Z85()
}

// authorizeGroup is the group server's Authorize: a client the spool
// server's ACL does not let read a stream is refused its groups too.
func (n *Node) authorizeGroup(env [][]byte, stream, _ string) error {
	if n.server.Allowed(env, stream) {
		return nil
	}
	return errors.New(pull.ForbiddenMessage(stream))
}

// CurvePublicKey returns the node's CURVE public key, which it gossips
// (the zero key for a node without keys).
func (n *Node) CurvePublicKey() socket.CurveKey { return n.sec.public }

// ClientSocketConfig returns cfg as the node's own client sockets use it,
// for a socket a program connects to mesh peers itself (group.Info, say):
// with a node key, a CURVE client with the node's key pair that uses the
// key each peer's node gossips (Config.CurveKey); without one, a socket
// that refuses, as clearly, peers that advertise a key. cfg is returned as
// it is when it sets PLAIN or CURVE itself.
func (n *Node) ClientSocketConfig(cfg socket.Config) socket.Config { return n.sec.clientSocket(cfg) }

// ServerSocketConfig returns cfg as the node's own served sockets use it
// (see Serve): with a node key, a CURVE server with it for the clients
// the node trusts. cfg is returned as it is when it sets PLAIN or CURVE
// itself, or the node has no key.
func (n *Node) ServerSocketConfig(cfg socket.Config) socket.Config { return n.sec.serverSocket(cfg) }
