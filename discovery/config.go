package discovery

import (
	"fmt"
	"log"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
)

// Profile selects a set of gossip timers.
type Profile int

const (
	// ProfileAuto, the zero value, is ProfileLocal when BindAddr is on
	// loopback ("localhost", 127.0.0.0/8, ::1) and ProfileLAN otherwise,
	// an empty BindAddr included.
	ProfileAuto Profile = iota
	// ProfileLAN uses memberlist's LAN timers (probe every 1 s, suspicion
	// multiplier 4, push/pull every 30 s) and binds 0.0.0.0:7946 by default.
	ProfileLAN
	// ProfileLocal uses fast timers for several nodes on one host (probe every
	// 250 ms, gossip every 25 ms, push/pull every 2 s) and binds
	// 127.0.0.1:0 by default. It is what tests and single-host demos use.
	ProfileLocal
)

// String returns "auto", "lan" or "local".
func (p Profile) String() string {
	switch p {
	case ProfileAuto:
		return "auto"
	case ProfileLAN:
		return "lan"
	case ProfileLocal:
		return "local"
	}
	return "Profile(" + strconv.Itoa(int(p)) + ")"
}

// resolve returns the profile p stands for with bind as the bind address:
// p itself, unless p is ProfileAuto.
func (p Profile) resolve(bind string) Profile {
	if p != ProfileAuto {
		return p
	}
	host, _, err := net.SplitHostPort(bind)
	if err != nil {
		return ProfileLAN
	}
	if isLoopbackHost(host) {
		return ProfileLocal
	}
	return ProfileLAN
}

// Config configures a Membership. The zero value is not usable: NodeName is
// required. New copies what it needs and never modifies the Config.
type Config struct {
	// NodeName identifies this node; it must be unique in the cluster and
	// stable across restarts of the same node. Required.
	NodeName string

	// BindAddr is the "host:port" gossip listens on (UDP and TCP). Port 0
	// picks a free port; GossipAddr reports it. Default "0.0.0.0:7946" for
	// ProfileLAN and ProfileAuto, "127.0.0.1:0" for ProfileLocal.
	BindAddr string

	// AdvertiseAddr is the "host:port" other nodes use to reach this node.
	// Default: the bind address (with a private interface address when
	// binding 0.0.0.0).
	AdvertiseAddr string

	// Seeds are gossip addresses of existing members, joined by New. If none
	// answers within JoinTimeout, New fails with an error wrapping ErrJoin,
	// unless RetryJoin is set: then New succeeds and keeps retrying in the
	// background with exponential backoff (capped at 30 s) until one join
	// succeeds or the Membership is closed.
	Seeds []string

	// RetryJoin makes joining Seeds a background task; see Seeds.
	RetryJoin bool

	// Key is the 16, 24 or 32-byte AES-GCM key that encrypts all gossip.
	// nil disables encryption (and key rotation). All members must share it.
	// Without a key, New refuses a bind address that is not loopback
	// unless AllowPlaintext is set.
	Key []byte

	// AllowPlaintext lets gossip run without Key on an address that is not
	// loopback. In clear text, anyone who can reach the gossip port can
	// join the mesh, read every advertisement and announce services and
	// spools of their own, so New refuses it unless this is set (a trusted,
	// isolated network, say).
	AllowPlaintext bool

	// Tags are extra user tags gossiped with this node. They count against
	// the 512-byte budget shared with advertisements. Keys starting with "~"
	// are reserved.
	Tags map[string]string

	// Identity tells this node apart from another process under the same
	// name: a short string (1 to 32 URL-safe base64 characters) gossiped
	// with the node, the same across restarts of the same node (say, kept
	// in its data directory with LoadIdentity). New refuses to start
	// (ErrNameTaken) when a live member with another identity holds
	// NodeName; a restarted node with the same identity takes its name
	// back. Default: NewIdentity, a new one for every New (then every
	// other live holder of the name is refused, and a restart waits for
	// the old incarnation to be found dead, as before).
	Identity string

	// CurveKey is this node's CURVE public key as 40 Z85 characters (see
	// package socket), gossiped so that others can reach the node's
	// CURVE servers (Member.CurveKey, Instance.CurveKey). "" advertises
	// none. A key learnt from gossip is only as trustworthy as the gossip:
	// without Key, anyone who reaches the gossip port can claim a node's
	// name with a key of their own.
	CurveKey string

	// Profile selects timers and the default BindAddr. The zero value,
	// ProfileAuto, chooses by BindAddr.
	Profile Profile

	// JoinTimeout bounds a join attempt when the caller's context has no
	// deadline (New, RetryJoin rounds, Join without deadline). Default 10 s
	// for ProfileLAN, 5 s for ProfileLocal.
	JoinTimeout time.Duration

	// Logger receives membership events and serf's and memberlist's own
	// logs. nil discards.
	Logger *slog.Logger
}

type settings struct {
	cfg  Config
	bind string
	port int
	adv  string
	advP int
}

func (c Config) validate() (settings, error) {
	s := settings{cfg: c}
	if c.NodeName == "" {
		return s, fmt.Errorf("%w: node name is required", ErrInvalid)
	}
	if err := checkNodeName(c.NodeName); err != nil {
		return s, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if s.cfg.Identity == "" {
		s.cfg.Identity = NewIdentity()
	} else if err := checkIdentity(c.Identity); err != nil {
		return s, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.CurveKey != "" && !validCurveKey(c.CurveKey) {
		return s, fmt.Errorf("%w: CURVE key %q is not 40 Z85 characters", ErrInvalid, c.CurveKey)
	}
	switch c.Profile {
	case ProfileAuto, ProfileLAN, ProfileLocal:
	default:
		return s, fmt.Errorf("%w: unknown profile %d", ErrInvalid, int(c.Profile))
	}
	s.cfg.Profile = c.Profile.resolve(c.BindAddr)
	bind := c.BindAddr
	if bind == "" {
		if s.cfg.Profile == ProfileLocal {
			bind = "127.0.0.1:0"
		} else {
			bind = "0.0.0.0:7946"
		}
	}
	var err error
	s.bind, s.port, err = splitHostPort(bind)
	if err != nil {
		return s, fmt.Errorf("%w: bind address %q: %v", ErrInvalid, bind, err)
	}
	if c.Key == nil && !c.AllowPlaintext && !isLoopbackHost(s.bind) {
		return s, fmt.Errorf("%w: gossip on %s without an encryption key: anyone who reaches the port can join the mesh and announce services; set Key (shared by all members), or AllowPlaintext on a trusted network, or bind to loopback", ErrInvalid, bind)
	}
	if c.AdvertiseAddr != "" {
		s.adv, s.advP, err = splitHostPort(c.AdvertiseAddr)
		if err != nil {
			return s, fmt.Errorf("%w: advertise address %q: %v", ErrInvalid, c.AdvertiseAddr, err)
		}
	}
	if c.Key != nil {
		switch len(c.Key) {
		case 16, 24, 32:
		default:
			return s, fmt.Errorf("%w: encryption key must be 16, 24 or 32 bytes, got %d", ErrInvalid, len(c.Key))
		}
	}
	for k, v := range c.Tags {
		if k == "" || k[0] == reservedPrefix {
			return s, fmt.Errorf("%w: tag key %q is empty or reserved", ErrInvalid, k)
		}
		_ = v
	}
	if c.JoinTimeout <= 0 {
		if s.cfg.Profile == ProfileLocal {
			s.cfg.JoinTimeout = 5 * time.Second
		} else {
			s.cfg.JoinTimeout = 10 * time.Second
		}
	}
	return s, nil
}

func splitHostPort(hp string) (string, int, error) {
	host, p, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// serfConfig builds the serf and memberlist configuration for s.
func (s settings) serfConfig(logw *log.Logger, events chan serf.Event, watch *nameWatch) (*serf.Config, error) {
	var ml *memberlist.Config
	sc := serf.DefaultConfig()
	switch s.cfg.Profile {
	case ProfileLocal:
		ml = memberlist.DefaultLocalConfig()
		ml.ProbeInterval = 250 * time.Millisecond
		ml.ProbeTimeout = 200 * time.Millisecond
		ml.GossipInterval = 25 * time.Millisecond
		ml.SuspicionMult = 4
		ml.PushPullInterval = 2 * time.Second
		ml.GossipToTheDeadTime = 5 * time.Second
		ml.TCPTimeout = time.Second
		ml.RetransmitMult = 4
		ml.DeadNodeReclaimTime = 500 * time.Millisecond
		sc.ReapInterval = time.Second
		sc.ReconnectInterval = time.Second
		sc.ReconnectTimeout = 2 * time.Minute
		sc.TombstoneTimeout = 2 * time.Minute
		sc.BroadcastTimeout = 2 * time.Second
		sc.LeavePropagateDelay = 250 * time.Millisecond
		sc.FlapTimeout = 5 * time.Second
		sc.RecentIntentTimeout = 30 * time.Second
		// Queries (key operations, member lookups) wait 2 s at most for
		// answers instead of 400 ms: 25 ms gossip * 16 missed replies on a
		// loaded 2-core host.
		sc.QueryTimeoutMult = 80
	default:
		ml = memberlist.DefaultLANConfig()
		// A restarted node that comes back on a new port may take over its
		// name once the old incarnation has been dead this long.
		ml.DeadNodeReclaimTime = 30 * time.Second
	}
	ml.BindAddr = s.bind
	ml.BindPort = s.port
	if s.adv != "" {
		ml.AdvertiseAddr = s.adv
		ml.AdvertisePort = s.advP
	}
	ml.Logger = logw
	ml.Alive = aliveFilter{watch: watch}
	if s.cfg.Key != nil {
		kr, err := memberlist.NewKeyring(nil, append([]byte(nil), s.cfg.Key...))
		if err != nil {
			return nil, fmt.Errorf("%w: encryption key: %v", ErrInvalid, err)
		}
		ml.SecretKey = nil
		ml.Keyring = kr
		ml.GossipVerifyIncoming = true
		ml.GossipVerifyOutgoing = true
	}
	sc.MemberlistConfig = ml
	sc.NodeName = s.cfg.NodeName
	sc.Logger = logw
	sc.LogOutput = nil
	sc.EventCh = events
	sc.QueryResponseSizeLimit = queryResponseLimit
	// We coalesce per watcher ourselves and want events as they happen.
	sc.CoalescePeriod = 0
	sc.QuiescentPeriod = 0
	sc.UserCoalescePeriod = 0
	sc.UserQuiescentPeriod = 0
	// Serf's automatic resolution makes the minority side of a name conflict
	// shut itself down. A node restarted on a new port before the cluster has
	// declared its old incarnation dead would be that minority and kill
	// itself; instead it waits (see DeadNodeReclaimTime) and takes over the
	// name once the old incarnation is dead.
	sc.EnableNameConflictResolution = false
	return sc, nil
}

// isLoopbackHost reports whether host (a name or an address, no port) is
// on loopback: "localhost", 127.0.0.0/8 or ::1.
func isLoopbackHost(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}
