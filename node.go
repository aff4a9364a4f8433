package fastmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sync"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/internal/diskguard"
	"github.com/fastmq/fastmq/internal/nodesec"
	"github.com/fastmq/fastmq/internal/streams"
	"github.com/fastmq/fastmq/patterns/follow"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// ErrClosed is returned by calls on a closed Node.
var ErrClosed = streams.ErrClosed

// Config configures a Node. Name and DataDir are required; the zero value
// of every other field is a working default for one host.
type Config struct {
	// Name of the node, unique in the mesh. Consumers key their offsets by
	// publisher name, so a publisher must keep its name across restarts.
	Name string
	// DataDir holds the node's spools (one directory per stream under
	// streams/) and its consumers' offsets (under consumers/).
	DataDir string
	// GossipAddr is the serf bind address. Default "127.0.0.1:0", or, when
	// a seed is on another host, the address of the local interface that
	// routes to it (port 0), so that a node never advertises loopback to a
	// remote mesh. A loopback GossipAddr with a seed on another host (and no
	// AdvertiseAddr) is refused. Gossip beyond loopback needs Key (or
	// GossipPlaintext).
	GossipAddr string
	// AdvertiseAddr is the gossip address others should use, if it differs.
	AdvertiseAddr string
	// Seeds are gossip addresses of nodes to join.
	Seeds []string
	// RetryJoin keeps trying the seeds in the background when none answers.
	RetryJoin bool
	// Key is the gossip encryption key (16, 24 or 32 bytes); nil = none.
	// Without a key, gossip on an address that is not loopback is refused
	// unless GossipPlaintext is set.
	Key []byte
	// GossipPlaintext allows gossip without Key on an address that is not
	// loopback (see discovery.Config.AllowPlaintext): only on a trusted,
	// isolated network.
	GossipPlaintext bool
	// Profile selects gossip timers. The zero value, discovery.ProfileAuto,
	// is discovery.ProfileLocal when GossipAddr is on loopback (as the
	// default is), else discovery.ProfileLAN.
	Profile discovery.Profile
	// SpoolEndpoints are where the spool server binds. Default: the gossip
	// host, port 0 ("tcp://127.0.0.1:0" with the default GossipAddr; every
	// interface when gossip binds 0.0.0.0). A loopback endpoint on a node
	// that gossips beyond loopback, without SpoolAdvertise, is refused:
	// remote consumers could not reach it.
	SpoolEndpoints []string
	// SpoolAdvertise is the endpoint advertised for the spool server, if it
	// differs from the first bound endpoint (for example a bind on 0.0.0.0).
	SpoolAdvertise string
	// Spool is the template for every stream's spool; Dir is set per
	// stream. A zero Spool.GroupInterval means adaptive group commit here
	// (spool's negative interval): every fsync takes the records written
	// during the previous one, which keeps latency at one fsync at low rates
	// and still batches under load. A zero Spool.MinSyncInterval means
	// StreamSyncInterval here (negative: fsyncs back to back).
	// Spool.VisibleBeforeSync serves every
	// stream's records to consumers once written, before their fsync
	// (publishes are still acknowledged once durable, and the fsyncs are
	// then 2 ms apart unless Spool.MinSyncInterval says otherwise; see
	// spool.Config.VisibleBeforeSync): a pull consumer learns of records an
	// OS crash lost through the log's epoch, and a consumer group's state
	// is cut back to the epoch's end, so that it delivers the new records
	// appended at the lost offsets (see package group).
	Spool spool.Config
	// GroupLeaseAfterSync makes the node's consumer groups lease a
	// record only once it is durable. By default they lease it as soon
	// as it is written to the stream's file, before its fsync, as a
	// broker delivers from its page cache (publishes are still
	// acknowledged once durable; only an OS crash can take records a
	// member received, and the group follows the stream's new epoch):
	// see group.ServerConfig.LeaseAfterSync.
	GroupLeaseAfterSync bool
	// DiskGuard limits what the node's spools may take of the disk (see
	// DiskGuard). The zero value refuses appends while the file system
	// under DataDir has less than 5 % free.
	DiskGuard DiskGuard
	// Interest configures interest retention (keep records until every
	// consumer group acknowledged them) and the report of groups far
	// behind; see InterestConfig.
	Interest InterestConfig
	// NoLocalIPC keeps the node's RPC on tcp. By default the servers it
	// handles (Handle) also listen on the unix socket twins of their tcp
	// endpoints, and its calls (Call) to instances on this host go over
	// them: see rpc.ServerConfig.NoLocalIPC. HandleOptions.Server may also
	// set it for one server.
	NoLocalIPC bool
	// LocalIPCDir is the directory of those twins, for both (default
	// fastmq-<uid> in the temp directory); it must be private to the
	// node's user. HandleOptions.Server.LocalIPCDir overrides it for one
	// server, and clients then do not find that server's twins.
	LocalIPCDir string
	// Socket configures the spool server's and consumers' sockets. With
	// a node key (CurveKey, CurveKeyFile) it must set no PLAIN or CURVE
	// fields: the node sets them.
	Socket socket.Config
	// CurveKey is the node's CURVE secret key (see socket.NewCurveKeypair
	// and `fastmq keygen`). With it the node's spool server and the
	// sockets it serves (Serve, Handle) are CURVE servers that accept the
	// client keys the node trusts (see CurveTrusted); its consumers, group
	// members, Dial and Call are CURVE clients with this key pair, each
	// connection with the key its peer advertises; and the node gossips
	// its public key (discovery.Config.CurveKey). A peer that advertises
	// no key is not connected to (ErrMixedMesh, in the sockets' events
	// and logs). The zero key: no CURVE; the node then refuses, as
	// clearly, to connect to peers that advertise a key.
	CurveKey socket.CurveKey
	// CurveKeyFile is a secret key file (NAME.key, as `fastmq keygen
	// --out NAME` writes it) to read CurveKey from, with
	// socket.LoadCurveSecretKey: a file its group or others may read is
	// refused.
	CurveKeyFile string
	// CurveTrusted are public keys the node trusts (pinned keys), as
	// servers it connects to and as clients of its servers, besides its
	// own. With gossip encrypted (Key) the node also trusts the keys its
	// mesh members advertise: a key learnt there is as trusted as the
	// mesh key. Without Key, gossip proves nothing (anyone who reaches
	// the gossip port may claim a name and a key), so only pinned keys
	// are trusted: a peer whose advertised key is not pinned is refused
	// with ErrMixedMesh, and a client whose key is not pinned is denied.
	CurveTrusted []socket.CurveKey
	// CurveAllow is a public key file (NAME.pub) or a directory of *.pub
	// files (read again as it changes, see socket.CurveKeyDir) of more
	// pinned keys, as CurveTrusted.
	CurveAllow string
	// ACL says which clients may read which streams of the node's spool
	// server, consumer groups included (see pull.ACL; pull.LoadACL reads
	// an ACL file). The node's own key may always read its streams (on a
	// node without keys its own consumers are NULL clients, which only
	// "*" rules admit). nil: every client the server admits reads every
	// stream. Its "limit members" lines bound a client's members in one
	// consumer group (group.ServerConfig.MemberLimit).
	ACL *pull.ACL
	// Logger receives the node's logs; nil discards them.
	Logger *slog.Logger
}

// Node is the one FastMQ object a process needs: it runs gossip discovery,
// owns the spools under its data directory, serves them to consumers and
// hands out consumers and discovered sockets.
//
// A Node is safe for concurrent use. Close and Shutdown are idempotent and
// close everything the node made, in order: sockets and consumers first,
// then the spool server, then the spools (flushed and synced), then gossip.
type Node struct {
	cfg Config
	log *slog.Logger

	members *discovery.Membership
	server  *pull.Server
	spoolEP string

	wg sync.WaitGroup // the goroutines running Dial's followers

	streams *streams.Set // the stream spools: open, failed, damaged

	openMu    sync.Mutex   // serialises opening offset stores (disk work); taken before mu
	mu        sync.Mutex   // guards the fields below; never held across I/O
	rpc       *nodeClients // Handle's servers and Call's clients (rpc.go)
	groupsMu  sync.Mutex   // guards groups
	groups    *groupHost   // consumer groups served and joined (group.go)
	consumers map[*pull.Consumer]consumerKey
	starting  map[consumerKey]struct{} // names and streams whose consumer is starting
	offsets   map[string]*spool.OffsetStore
	sockets   map[*socket.Socket]*follow.Follower // nil for served sockets
	closed    bool

	guard *diskguard.Guard // set by New before the node is shared

	sec      *nodesec.Security  // the node's CURVE keys, trust and ACL
	interest *group.BehindWatch // logs groups far behind; set by New
}

// New starts a node: opens the streams found on disk, starts the spool
// server that serves them and joins the gossip mesh, advertising them.
func New(cfg Config) (*Node, error) {
	if cfg.Name == "" {
		return nil, errors.New("fastmq: node needs a name")
	}
	if cfg.DataDir == "" {
		return nil, errors.New("fastmq: node needs a data directory")
	}
	cfg.Seeds = append([]string(nil), cfg.Seeds...)
	cfg.SpoolEndpoints = append([]string(nil), cfg.SpoolEndpoints...)
	if err := resolveNetwork(&cfg); err != nil {
		return nil, err
	}
	sec, err := loadSecurity(&cfg)
	if err != nil {
		return nil, err
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	n := &Node{
		sec:       sec,
		cfg:       cfg,
		log:       lg.With("component", "node", "node", cfg.Name),
		rpc:       newNodeClients(),
		consumers: make(map[*pull.Consumer]consumerKey),
		starting:  make(map[consumerKey]struct{}),
		offsets:   make(map[string]*spool.OffsetStore),
		sockets:   make(map[*socket.Socket]*follow.Follower),
	}
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "streams"), 0o755); err != nil {
		return nil, fmt.Errorf("fastmq: create data directory: %w", err)
	}
	// The node's identity lives with its data: a restart with the same
	// data directory takes its name back, another process under the same
	// name is refused while this one lives.
	identity, err := discovery.LoadIdentity(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("fastmq: node identity: %w", err)
	}
	// Streams already on disk are open before the spool server binds, so
	// a consumer's first fetch after a restart gets records, and advertised
	// in the node's first spool advertisement.
	n.streams = streams.New(streams.Config{Dir: filepath.Join(cfg.DataDir, "streams"), Open: n.openLog,
		Advertise: func(names []string) error { return n.members.AdvertiseSpool(n.spoolEP, names) }, Logger: n.log})
	if err := n.streams.OpenDisk(); err != nil {
		return nil, err
	}
	srv, err := pull.NewServer(pull.ServerConfig{
		Endpoints: cfg.SpoolEndpoints,
		Lookup:    n.streams.Lookup,
		Socket:    sec.ServerSocket(cfg.Socket),
		ACL:       sec.ACL(),
		Logger:    cfg.Logger,
	})
	if err != nil {
		n.streams.Close()
		return nil, err
	}
	n.server = srv
	n.spoolEP = cfg.SpoolAdvertise
	if n.spoolEP == "" {
		n.spoolEP = srv.Endpoints()[0]
	}
	m, err := discovery.New(discovery.Config{
		NodeName:       cfg.Name,
		Identity:       identity,
		BindAddr:       cfg.GossipAddr,
		AdvertiseAddr:  cfg.AdvertiseAddr,
		Seeds:          cfg.Seeds,
		RetryJoin:      cfg.RetryJoin,
		Key:            cfg.Key,
		AllowPlaintext: cfg.GossipPlaintext,
		Profile:        cfg.Profile,
		CurveKey:       sec.PublicZ85(),
		Logger:         cfg.Logger,
	})
	if err != nil {
		srv.Close()
		n.streams.Close()
		return nil, fmt.Errorf("fastmq: start discovery: %w", err)
	}
	n.members = m
	sec.SetMembers(m)
	if names := n.streams.Served(); len(names) > 0 {
		if err := m.AdvertiseSpool(n.spoolEP, names); err != nil {
			n.Close()
			return nil, fmt.Errorf("fastmq: advertise streams: %w", err)
		}
	}
	// Every node answers consumer group requests for its streams.
	if _, err := n.groupHost(); err != nil {
		n.Close()
		return nil, err
	}
	guard, err := diskguard.New(diskguard.Config{Limits: cfg.DiskGuard, Dir: cfg.DataDir, Logs: n.streamLogs, Logger: n.log})
	if err != nil {
		n.Close()
		return nil, err
	}
	n.guard = guard
	n.interest = group.NewBehindWatch(n.GroupsBehind, n.cfg.Interest.CheckInterval, n.log)
	n.log.Info("node started", "endpoint", n.spoolEP, "gossip", m.GossipAddr(), "curve", sec.Enabled())
	if n.SpoolOpen() {
		n.log.Warn("spool server open to the network: any client that reaches it reads every stream and probes stream names; give the node a CURVE key and an ACL",
			"endpoint", n.spoolEP, "gossip", m.GossipAddr(), "fix", "Config.CurveKey or CurveKeyFile, CurveAllow, ACL")
	}
	return n, nil
}

// Name returns the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// Identity returns the node's identity: gossiped with its name, kept in its
// data directory (see discovery.LoadIdentity).
func (n *Node) Identity() string { return n.members.Identity() }

// Logger returns the node's logger (never nil).
func (n *Node) Logger() *slog.Logger {
	if n.cfg.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return n.cfg.Logger
}

// DataDir returns the node's data directory.
func (n *Node) DataDir() string { return n.cfg.DataDir }

// GossipAddr returns the address other nodes join.
func (n *Node) GossipAddr() string { return n.members.GossipAddr() }

// SpoolEndpoint returns the advertised endpoint of the spool server.
func (n *Node) SpoolEndpoint() string { return n.spoolEP }

// Membership returns the node's gossip membership, for lookups and watches.
func (n *Node) Membership() *discovery.Membership { return n.members }

// Server returns the node's spool server.
func (n *Node) Server() *pull.Server { return n.server }

// Shutdown leaves the mesh gracefully (others see "left", not "failed"),
// then closes the node as Close does. ctx bounds the graceful part: the
// leave, and how long the node's sockets linger to deliver what they have
// queued; once ctx ends they are cut, the rest of the close goes on, and
// Shutdown's error includes ctx's. It is idempotent.
func (n *Node) Shutdown(ctx context.Context) error {
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	var leaveErr error
	if !closed {
		// RPC servers drain first: they withdraw their advertisements,
		// finish what they accepted, then close.
		leaveErr = errors.Join(n.shutdownRPC(ctx), n.members.Leave(ctx))
	}
	err := errors.Join(leaveErr, n.close(ctx))
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		// Sockets stopped lingering when ctx ended: say so.
		err = errors.Join(err, ctx.Err())
	}
	return err
}

// Close closes everything the node made: sockets and consumers (committing
// acknowledged offsets), the spool server, the spools (flushed and synced)
// and gossip, without a graceful leave. It returns after every goroutine
// the node owns has exited. It is idempotent.
func (n *Node) Close() error { return n.close(context.Background()) }

// close is Close, passing ctx to closeSocket.
func (n *Node) close(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	socks := n.sockets
	cons := n.consumers
	n.sockets, n.consumers = nil, nil
	n.mu.Unlock()

	if n.guard != nil {
		n.guard.Close()
	}
	if n.interest != nil {
		n.interest.Close()
	}
	n.closeRPC() // servers stop (their sockets are closed below), clients too
	var errs []error
	for s, f := range socks {
		if f != nil {
			f.Close()
		}
		if err := closeSocket(ctx, s); err != nil && !errors.Is(err, socket.ErrClosed) {
			errs = append(errs, err)
		}
	}
	n.wg.Wait()
	for c := range cons {
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := n.server.Close(); err != nil {
		errs = append(errs, err)
	}
	// Opening an offset store after closed was set discards it, so the
	// map no longer changes; they are closed outside n.mu.
	n.mu.Lock()
	offsets := n.offsets
	n.offsets = nil
	n.mu.Unlock()
	if err := n.streams.Close(); err != nil {
		errs = append(errs, err)
	}
	for _, st := range offsets {
		if err := st.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.members != nil {
		if err := n.members.Close(); err != nil && !errors.Is(err, discovery.ErrClosed) {
			errs = append(errs, err)
		}
	}
	n.log.Info("node closed")
	return errors.Join(errs...)
}

// closeSocket closes one of the node's sockets for Close and Shutdown: it
// lingers to deliver what is queued up to the socket's Config.Linger, and
// no longer than ctx allows (Close passes a background context).
func closeSocket(ctx context.Context, s *socket.Socket) error {
	err := s.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return nil // ctx's end is reported once, by Shutdown
	}
	return err
}

// owned is a field of a nested config that a Node method sets itself.
type owned struct {
	name  string
	value any
}

// nodeOwned returns an error naming the first of fields that the caller
// set (to other than its zero value): a Node method that takes a nested
// library config refuses a field it sets itself rather than overwrite it.
func nodeOwned(config string, fields ...owned) error {
	for _, f := range fields {
		if v := reflect.ValueOf(f.value); v.IsValid() && !v.IsZero() {
			return fmt.Errorf("fastmq: %s.%s is set by the node: leave it zero", config, f.name)
		}
	}
	return nil
}
