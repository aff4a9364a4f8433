package fastmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/patterns/follow"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// ErrClosed is returned by calls on a closed Node.
var ErrClosed = errors.New("fastmq: closed")

// ErrConsumerExists reports a second live consumer with the same name and
// stream on one node: the two would overwrite each other's offsets.
var ErrConsumerExists = errors.New("fastmq: consumer exists")

// ErrBadStreamName reports a stream name that cannot be used.
var ErrBadStreamName = errors.New("fastmq: bad stream name")

var streamNameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

// Config configures a Node. Name and DataDir are required; the zero value
// of every other field is a working default for one host.
type Config struct {
	// Name of the node, unique in the mesh. Consumers key their offsets by
	// publisher name, so a publisher must keep its name across restarts.
	Name string
	// DataDir holds the node's spools (one directory per stream under
	// streams/) and its consumers' offsets (under consumers/).
	DataDir string
	// GossipAddr is the serf bind address. Default "127.0.0.1:0".
	GossipAddr string
	// AdvertiseAddr is the gossip address others should use, if it differs.
	AdvertiseAddr string
	// Seeds are gossip addresses of nodes to join.
	Seeds []string
	// RetryJoin keeps trying the seeds in the background when none answers.
	RetryJoin bool
	// Key is the gossip encryption key (16, 24 or 32 bytes); nil = none.
	Key []byte
	// Profile selects gossip timers. The zero value, discovery.ProfileAuto,
	// is discovery.ProfileLocal when GossipAddr is on loopback (as the
	// default is), else discovery.ProfileLAN.
	Profile discovery.Profile
	// SpoolEndpoints are where the spool server binds. Default
	// "tcp://127.0.0.1:0".
	SpoolEndpoints []string
	// SpoolAdvertise is the endpoint advertised for the spool server, if it
	// differs from the first bound endpoint (for example a bind on 0.0.0.0).
	SpoolAdvertise string
	// Spool is the template for every stream's spool; Dir is set per
	// stream. A zero Spool.GroupInterval means adaptive group commit here
	// (spool's negative interval): every fsync takes the records written
	// during the previous one, which keeps latency at one fsync at low rates
	// and still batches under load.
	Spool spool.Config
	// Socket configures the spool server's and consumers' sockets.
	Socket socket.Config
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

	openMu    sync.Mutex // serialises opening streams and offset stores (disk and gossip work); taken before mu
	mu        sync.Mutex // guards the fields below; never held across I/O
	streams   map[string]*spool.Log
	consumers map[*pull.Consumer]consumerKey
	starting  map[consumerKey]struct{} // consumers being started, reserved
	offsets   map[string]*spool.OffsetStore
	sockets   map[*socket.Socket]*follow.Follower // nil for served sockets
	closed    bool
	wg        sync.WaitGroup
}

// New starts a node: opens nothing on disk until a stream is used, starts
// the spool server and joins the gossip mesh.
func New(cfg Config) (*Node, error) {
	if cfg.Name == "" {
		return nil, errors.New("fastmq: node needs a name")
	}
	if cfg.DataDir == "" {
		return nil, errors.New("fastmq: node needs a data directory")
	}
	cfg.Seeds = append([]string(nil), cfg.Seeds...)
	cfg.SpoolEndpoints = append([]string(nil), cfg.SpoolEndpoints...)
	if cfg.GossipAddr == "" {
		cfg.GossipAddr = "127.0.0.1:0"
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	n := &Node{
		cfg:       cfg,
		log:       lg.With("component", "node", "node", cfg.Name),
		streams:   make(map[string]*spool.Log),
		consumers: make(map[*pull.Consumer]consumerKey),
		starting:  make(map[consumerKey]struct{}),
		offsets:   make(map[string]*spool.OffsetStore),
		sockets:   make(map[*socket.Socket]*follow.Follower),
	}
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "streams"), 0o755); err != nil {
		return nil, fmt.Errorf("fastmq: create data directory: %w", err)
	}
	srv, err := pull.NewServer(pull.ServerConfig{
		Endpoints: cfg.SpoolEndpoints,
		Lookup:    n.lookupStream,
		Socket:    cfg.Socket,
		Logger:    cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	n.server = srv
	n.spoolEP = cfg.SpoolAdvertise
	if n.spoolEP == "" {
		n.spoolEP = srv.Endpoints()[0]
	}
	m, err := discovery.New(discovery.Config{
		NodeName:      cfg.Name,
		BindAddr:      cfg.GossipAddr,
		AdvertiseAddr: cfg.AdvertiseAddr,
		Seeds:         cfg.Seeds,
		RetryJoin:     cfg.RetryJoin,
		Key:           cfg.Key,
		Profile:       cfg.Profile,
		Logger:        cfg.Logger,
	})
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("fastmq: start discovery: %w", err)
	}
	n.members = m
	// Streams already on disk are served and advertised from the start.
	entries, err := os.ReadDir(filepath.Join(cfg.DataDir, "streams"))
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("fastmq: list streams: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() && streamNameRE.MatchString(e.Name()) {
			if _, err := n.Stream(e.Name()); err != nil {
				n.Close()
				return nil, err
			}
		}
	}
	n.log.Info("node started", "endpoint", n.spoolEP, "gossip", m.GossipAddr())
	return n, nil
}

// Name returns the node's name.
func (n *Node) Name() string { return n.cfg.Name }

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

func (n *Node) lookupStream(name string) (*spool.Log, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l, ok := n.streams[name]
	return l, ok
}

// Stream opens (creating if needed) the local spool of a stream, serves it
// and advertises it. Calling it again returns the same log. The node owns
// the log: do not Close it.
func (n *Node) Stream(name string) (*spool.Log, error) {
	if !streamNameRE.MatchString(name) {
		return nil, fmt.Errorf("%w: %q (want 1-128 of letters, digits, '.', '_', '-')", ErrBadStreamName, name)
	}
	n.mu.Lock()
	l, ok := n.streams[name]
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if ok {
		return l, nil
	}
	// Opening recovers the spool and re-advertises: slow work done
	// outside n.mu, so serving other streams goes on meanwhile.
	n.openMu.Lock()
	defer n.openMu.Unlock()
	n.mu.Lock()
	closed = n.closed
	l, ok = n.streams[name]
	names := n.streamNamesLocked()
	n.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if ok {
		return l, nil
	}
	scfg := n.cfg.Spool
	scfg.Dir = filepath.Join(n.cfg.DataDir, "streams", name)
	if scfg.GroupInterval == 0 {
		scfg.GroupInterval = -1
	}
	if scfg.Logger == nil {
		scfg.Logger = n.cfg.Logger
	}
	l, err := spool.Open(scfg)
	if err != nil {
		return nil, fmt.Errorf("fastmq: open stream %q: %w", name, err)
	}
	names = append(names, name)
	sort.Strings(names)
	if err := n.members.AdvertiseSpool(n.spoolEP, names); err != nil {
		l.Close()
		return nil, fmt.Errorf("fastmq: advertise stream %q: %w", name, err)
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		l.Close()
		return nil, ErrClosed
	}
	n.streams[name] = l
	n.mu.Unlock()
	n.log.Info("stream open", "topic", name, "offset", l.NextOffset())
	return l, nil
}

func (n *Node) streamNamesLocked() []string {
	names := make([]string, 0, len(n.streams))
	for s := range n.streams {
		names = append(names, s)
	}
	sort.Strings(names)
	return names
}

// Streams returns the names of the node's open streams, sorted.
func (n *Node) Streams() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.streamNamesLocked()
}

// Publish appends one record with value to the local spool of stream and
// returns its offset once it is durable under the spool's sync policy.
// Consumers anywhere in the mesh pull it from here.
func (n *Node) Publish(ctx context.Context, stream string, value []byte, headers ...spool.Header) (uint64, error) {
	return n.Append(ctx, stream, spool.Record{Value: value, Headers: headers})
}

// Append appends records to the local spool of stream and returns the
// offset of the first, once they are durable under the sync policy.
func (n *Node) Append(ctx context.Context, stream string, recs ...spool.Record) (uint64, error) {
	l, err := n.Stream(stream)
	if err != nil {
		return 0, err
	}
	return l.Append(ctx, recs...)
}

// ConsumerConfig configures a consumer made by a Node.
type ConsumerConfig struct {
	// Stream to consume. Required.
	Stream string
	// Name of the consumer. Consumers with the same name on the same node
	// share committed offsets (under DataDir/consumers/Name); each name
	// gets every record of the stream. Required.
	Name string
	// Pull configures the consumer: Start, OnOutOfRange, MaxBytes,
	// MaxWait, CommitInterval, Buffer and the others keep their meaning
	// and defaults from package pull. The node sets Stream and Name from
	// the fields above, Offsets to the name's offset store, Discovery to
	// its gossip, Socket to the node's Config.Socket (with a fresh
	// identity) and Logger to the node's logger, whatever they hold here.
	// An OnClose set here runs before the node's own.
	Pull pull.ConsumerConfig
}

// Consume starts a consumer of stream that pulls from every publisher of it
// in the mesh (this node included) and keeps its offsets under the node's
// data directory. The node closes it on Close; closing it earlier is fine.
func (n *Node) Consume(cfg ConsumerConfig) (*pull.Consumer, error) {
	if !streamNameRE.MatchString(cfg.Name) {
		return nil, fmt.Errorf("fastmq: bad consumer name %q", cfg.Name)
	}
	if !streamNameRE.MatchString(cfg.Stream) {
		return nil, fmt.Errorf("%w: %q", ErrBadStreamName, cfg.Stream)
	}
	key := consumerKey{cfg.Name, cfg.Stream}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, ErrClosed
	}
	if n.consumingLocked(key) {
		n.mu.Unlock()
		return nil, fmt.Errorf("%w: %q already consumes %q on this node", ErrConsumerExists, cfg.Name, cfg.Stream)
	}
	n.starting[key] = struct{}{} // reserved until the consumer runs or fails
	n.mu.Unlock()
	store, err := n.offsetStore(cfg.Name)
	if err != nil {
		n.mu.Lock()
		delete(n.starting, key)
		n.mu.Unlock()
		return nil, err
	}
	var c *pull.Consumer
	pcfg := cfg.Pull
	pcfg.Stream, pcfg.Name = cfg.Stream, cfg.Name
	pcfg.Offsets, pcfg.Discovery, pcfg.Logger = store, n.members, n.cfg.Logger
	pcfg.Socket = n.cfg.Socket
	pcfg.Socket.Identity = nil // each consumer socket gets its own identity
	pcfg.OnClose = func() {
		if cfg.Pull.OnClose != nil {
			cfg.Pull.OnClose()
		}
		n.mu.Lock()
		delete(n.consumers, c)
		n.mu.Unlock()
	}
	c, err = pull.NewConsumer(pcfg)
	n.mu.Lock()
	delete(n.starting, key)
	if err != nil {
		n.mu.Unlock()
		return nil, err
	}
	if n.closed {
		n.mu.Unlock()
		c.Close()
		return nil, ErrClosed
	}
	n.consumers[c] = key
	n.mu.Unlock()
	return c, nil
}

// offsetStore returns the offset store of the consumers called name,
// opening it on first use. The store is opened outside n.mu; openMu makes
// sure only one is opened (it holds a file lock).
func (n *Node) offsetStore(name string) (*spool.OffsetStore, error) {
	n.mu.Lock()
	st := n.offsets[name]
	n.mu.Unlock()
	if st != nil {
		return st, nil
	}
	n.openMu.Lock()
	defer n.openMu.Unlock()
	n.mu.Lock()
	st, closed := n.offsets[name], n.closed
	n.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case st != nil:
		return st, nil
	}
	st, err := spool.OpenOffsets(filepath.Join(n.cfg.DataDir, "consumers", name))
	if err != nil {
		return nil, fmt.Errorf("fastmq: open offsets of consumer %q: %w", name, err)
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		st.Close()
		return nil, ErrClosed
	}
	n.offsets[name] = st
	n.mu.Unlock()
	return st, nil
}

// consumerKey names a consumer: one live consumer per name and stream.
type consumerKey struct{ name, stream string }

// consumingLocked reports whether a consumer of key runs or is starting.
func (n *Node) consumingLocked(key consumerKey) bool {
	if _, ok := n.starting[key]; ok {
		return true
	}
	for _, k := range n.consumers {
		if k == key {
			return true
		}
	}
	return false
}

// Serve makes a socket of kind, binds it to endpoint and advertises it in
// the mesh as service. The node closes the socket on Close.
func (n *Node) Serve(kind socket.Kind, service, endpoint string, cfg socket.Config) (*socket.Socket, error) {
	if cfg.Logger == nil {
		cfg.Logger = n.cfg.Logger
	}
	s, err := socket.New(kind, cfg)
	if err != nil {
		return nil, err
	}
	bound, err := s.Bind(endpoint)
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := n.members.Advertise(discovery.Service{Name: service, Kind: kind.String(), Endpoints: []string{bound}}); err != nil {
		s.Close()
		return nil, fmt.Errorf("fastmq: advertise %q: %w", service, err)
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		s.Close()
		return nil, ErrClosed
	}
	n.sockets[s] = nil
	n.mu.Unlock()
	return s, nil
}

// Dial makes a socket of kind connected to every discovered instance of
// service. It follows the gossip: it connects to instances as they appear
// and disconnects from those that fail or leave. The node closes the socket
// on Close.
func (n *Node) Dial(kind socket.Kind, service string, cfg socket.Config) (*socket.Socket, error) {
	if cfg.Logger == nil {
		cfg.Logger = n.cfg.Logger
	}
	s, err := socket.New(kind, cfg)
	if err != nil {
		return nil, err
	}
	f, err := follow.New(follow.Config{Socket: s, Service: service, Discovery: n.members, Logger: n.cfg.Logger})
	if err != nil {
		s.Close()
		return nil, err
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		s.Close()
		return nil, ErrClosed
	}
	n.sockets[s] = f
	n.wg.Add(1)
	n.mu.Unlock()
	go func() {
		defer n.wg.Done()
		if err := f.Run(context.Background()); !errors.Is(err, follow.ErrClosed) {
			n.log.Error("following a service stopped", "service", service, "err", err)
		}
	}()
	return s, nil
}

// Shutdown leaves the mesh gracefully (others see "left", not "failed"),
// then closes the node as Close does, passing ctx on to the closing of its
// sockets. It is idempotent.
func (n *Node) Shutdown(ctx context.Context) error {
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	var leaveErr error
	if !closed {
		leaveErr = n.members.Leave(ctx)
	}
	return errors.Join(leaveErr, n.close(ctx))
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
	// Opening a stream or an offset store after closed was set discards
	// it, so the maps no longer change; they are closed outside n.mu.
	n.mu.Lock()
	streams, offsets := n.streams, n.offsets
	n.streams, n.offsets = nil, nil
	n.mu.Unlock()
	for name, l := range streams {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("fastmq: close stream %q: %w", name, err))
		}
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

// closeSocket closes one of the node's sockets for Close and Shutdown. ctx
// is Shutdown's bound on the time a socket may linger to deliver what it
// has queued (Close passes a background context); socket.Socket.Close
// lingers up to the socket's Config.Linger.
func closeSocket(ctx context.Context, s *socket.Socket) error {
	return s.Close()
}
