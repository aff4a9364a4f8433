// Package nodesec resolves a fastmq node's CURVE key pair and whom it
// trusts (pinned keys, a directory of keys, keys learnt from encrypted
// gossip), and turns the node's socket templates into CURVE servers and
// clients that use them: the Authenticator of the node's servers and the
// CurveServerKeyFor of its clients.
package nodesec

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

// Config is what a node's security is resolved from: the CURVE fields of
// fastmq.Config, whether gossip is encrypted, and the node's socket
// template.
type Config struct {
	CurveKey     socket.CurveKey
	CurveKeyFile string
	CurveTrusted []socket.CurveKey
	CurveAllow   string
	ACL          *pull.ACL
	// GossipEncrypted: gossip has a key, so a CURVE key learnt there is
	// as trusted as the mesh key.
	GossipEncrypted bool
	// Socket is the node's socket template (fastmq.Config.Socket): with a
	// node key it must set no PLAIN or CURVE fields.
	Socket socket.Config
}

// Security is a node's CURVE key pair and whom it trusts, resolved from
// its Config by New. It is safe for concurrent use.
type Security struct {
	members atomic.Pointer[discovery.Membership] // set by SetMembers once gossip runs
	public  socket.CurveKey
	secret  socket.CurveKey
	pinned  map[socket.CurveKey]bool // CurveTrusted, the CurveAllow file, and the node's own key
	dir     *socket.CurveKeyDir      // the CurveAllow directory; nil if none
	gossip  bool                     // gossip is encrypted: a key learnt there is trusted
	acl     *pull.ACL                // the spool server's ACL, the node's own key added; nil: none
	hooked  bool                     // a node without keys still checks peers (no PLAIN or CURVE of the caller's own)
	enabled bool                     // the node has a key pair
}

// New resolves the CURVE settings of cfg: it reads the key files.
func New(cfg Config) (*Security, error) {
	sec := &Security{pinned: map[socket.CurveKey]bool{}, gossip: cfg.GossipEncrypted}
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
		acl := &pull.ACL{Rules: append([]pull.ACLRule{{Client: sec.public.Z85(), Streams: []string{"*"}}}, cfg.ACL.Rules...), Limits: cfg.ACL.Limits}
		sec.acl = acl
	}
	return sec, nil
}

// isPinned reports whether k is trusted without gossip.
func (s *Security) isPinned(k socket.CurveKey) bool {
	if s.pinned[k] {
		return true
	}
	return s.dir != nil && s.dir.Authenticate(socket.AuthRequest{Mechanism: "CURVE", ClientKey: k}) == nil
}

// trusted reports whether k may be used: pinned, or learnt from encrypted
// gossip (advertised by a member that has not left).
func (s *Security) trusted(k socket.CurveKey) bool {
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
func (s *Security) Authenticate(r socket.AuthRequest) error {
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
func (s *Security) serverKeyFor(endpoint string) (socket.CurveKey, error) {
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
func (s *Security) advertised(endpoint string) (node, key string, found bool) {
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

// ServerSocket returns cfg for a socket the node serves: a CURVE server
// with the node's key, accepting the clients it trusts (and passing the
// caller's Authenticator too, if any), when the node has keys and cfg
// sets no security of its own.
func (s *Security) ServerSocket(cfg socket.Config) socket.Config {
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

// ClientSocket returns cfg for a socket the node connects: a CURVE client
// of each peer with its advertised key, with the node's key pair, when
// the node has keys (a node without keys refuses CURVE peers clearly),
// unless cfg sets security of its own.
func (s *Security) ClientSocket(cfg socket.Config) socket.Config {
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

// PublicZ85 returns the public key to gossip, "" for a node without keys.
func (s *Security) PublicZ85() string {
	if !s.enabled {
		return ""
	}
	return s.public.Z85()
}

// SetMembers gives the security the node's gossip, once it runs: keys its
// members advertise are then known (and trusted with encrypted gossip).
func (s *Security) SetMembers(m *discovery.Membership) { s.members.Store(m) }

// Public returns the node's CURVE public key (the zero key without one).
func (s *Security) Public() socket.CurveKey { return s.public }

// Enabled reports whether the node has a CURVE key pair.
func (s *Security) Enabled() bool { return s.enabled }

// ACL returns the spool server's ACL, the node's own key added; nil: none.
func (s *Security) ACL() *pull.ACL { return s.acl }
