package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/serf/serf"
)

// eventBuffer is the capacity of the channel serf delivers member events on.
// Our consumer never blocks, so it only absorbs bursts.
const eventBuffer = 4096

// Membership is this node's view of the gossip cluster and its own
// advertisement. It is safe for concurrent use. Advertise, Withdraw,
// AdvertiseSpool, Join, Leave, AskMembers and the key operations block on
// the network; Lookup, Members, Name and GossipAddr do not. Close and Leave
// are safe to call more than once. Returned slices and maps are owned by
// the caller.
type Membership struct {
	set     settings
	log     *slog.Logger
	serf    *serf.Serf
	events  chan serf.Event
	name    string
	addr    string          // advertised gossip host:port
	host    string          // advertised gossip host
	closing <-chan struct{} // closed by Close
	ctx     context.Context // cancelled by Close
	cancel  context.CancelFunc

	names *nameWatch // alive messages for our own name, from others

	tagMu     sync.Mutex // serializes changes of the local advertisement
	user      map[string]string
	base      map[string]string // user tags and the reserved identity tag
	services  map[string]Service
	spool     *SpoolAd // as advertised: fitted to the tags, maybe partial
	spoolWant *SpoolAd // as asked for by AdvertiseSpool
	// tagRetries counts tag updates memberlist dropped and setTags gave
	// again.
	tagRetries atomic.Uint64

	mu       sync.Mutex // guards everything below and wg.Add
	closed   bool
	nameErr  error         // the name turned out to be taken (background join)
	stopped  chan struct{} // closed when nameErr is set
	view     map[string]*nodeView
	self     advert
	watchers map[*watcher]struct{}
	wg       sync.WaitGroup

	exitWait  time.Duration
	closeOnce sync.Once
	closeErr  error
}

// nodeView is what we know of one member, maintained from serf events.
type nodeView struct {
	addr   string
	status Status
	adv    advert
}

// New starts a gossip node and, if cfg.Seeds is set, joins them (see
// Config.Seeds for the failure and retry behaviour).
func New(cfg Config) (*Membership, error) {
	set, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	logger = logger.With(slog.String("node", cfg.NodeName))
	m := &Membership{
		stopped:  make(chan struct{}),
		set:      set,
		log:      logger,
		events:   make(chan serf.Event, eventBuffer),
		name:     cfg.NodeName,
		names:    &nameWatch{name: cfg.NodeName, identity: set.cfg.Identity},
		user:     map[string]string{},
		base:     map[string]string{identityKey: set.cfg.Identity},
		services: map[string]Service{},
		view:     map[string]*nodeView{},
		watchers: map[*watcher]struct{}{},
	}
	if cfg.CurveKey != "" {
		m.base[curveKeyTag] = cfg.CurveKey
	}
	for k, v := range cfg.Tags {
		m.user[k] = v
		m.base[k] = v
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.closing = m.ctx.Done()
	if err := checkTagsSize(m.base); err != nil {
		m.cancel()
		return nil, err
	}
	sc, err := set.serfConfig(newGossipLogger(logger), m.events, m.names)
	if err != nil {
		m.cancel()
		return nil, err
	}
	sc.Tags = buildTags(m.base, nil, nil, "")
	// Close waits this long at most for serf's goroutines: a probe waits up
	// to 8 (memberlist's awareness maximum) probe intervals, a stream handler
	// the TCP timeout.
	m.exitWait = 8*sc.MemberlistConfig.ProbeInterval + sc.MemberlistConfig.TCPTimeout + time.Second
	s, err := serf.Create(sc)
	if err != nil {
		m.cancel()
		return nil, fmt.Errorf("discovery: start gossip on %s:%d: %w", set.bind, set.port, err)
	}
	m.serf = s
	local := s.Memberlist().LocalNode()
	m.host = local.Addr.String()
	m.addr = net.JoinHostPort(m.host, strconv.Itoa(int(local.Port)))
	m.names.bound(m.addr)
	m.self = advert{user: cloneMap(m.user), services: map[string]Service{}, identity: set.cfg.Identity, curveKey: cfg.CurveKey}
	m.view[m.name] = &nodeView{addr: m.addr, status: StatusAlive, adv: m.self}

	m.wg.Add(1)
	go m.consume()
	m.log.Info("gossip started", slog.String("endpoint", m.addr), slog.String("profile", set.cfg.Profile.String()), slog.Bool("encrypted", cfg.Key != nil))

	if len(cfg.Seeds) > 0 {
		seeds := slices.Clone(cfg.Seeds)
		if cfg.RetryJoin {
			m.wg.Add(1)
			go m.retryJoin(seeds)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), set.cfg.JoinTimeout)
			_, err := m.Join(ctx, seeds...)
			cancel()
			if err == nil {
				err = m.checkName()
			}
			if err != nil {
				m.Close()
				return nil, err
			}
		}
	}
	return m, nil
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Name returns the node name.
func (m *Membership) Name() string { return m.name }

// Identity returns this node's identity (Config.Identity, or the one New
// made up).
func (m *Membership) Identity() string { return m.set.cfg.Identity }

// Err returns why this node stopped gossiping on its own, or nil: with
// RetryJoin, an error matching ErrNameTaken when the background join found
// the name held by a live member with another identity.
func (m *Membership) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nameErr
}

// Stopped is closed when this node stops gossiping on its own (Err then
// says why); not by Close.
func (m *Membership) Stopped() <-chan struct{} { return m.stopped }

// GossipAddr returns the "host:port" other nodes use to reach this node's
// gossip (the advertised address, with port 0 resolved to the bound port).
func (m *Membership) GossipAddr() string { return m.addr }

func (m *Membership) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// Leave broadcasts that this node is leaving, so that others report it left
// rather than failed, waits for the broadcast to propagate (bounded by ctx
// and the profile's broadcast timeout), then closes the membership. It
// returns ctx's error if ctx ended first; the membership is closed either way.
func (m *Membership) Leave(ctx context.Context) error {
	err := m.serfCall(ctx, m.serf.Leave)
	if errors.Is(err, ErrClosed) {
		return err
	}
	if err != nil && ctx.Err() == nil {
		err = fmt.Errorf("discovery: leave: %w", err)
	}
	m.log.Info("left cluster")
	if cerr := m.Close(); err == nil && cerr != nil && !errors.Is(cerr, ErrClosed) {
		err = cerr
	}
	return err
}

// serfCall runs fn, a serf call that may block on the network, on a
// goroutine the Membership owns, and waits for it or for ctx (then it
// returns ctx.Err(); fn ends on its own, and Close waits for it). It
// returns ErrClosed on a closed Membership, fn's error otherwise.
func (m *Membership) serfCall(ctx context.Context, fn func() error) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	m.wg.Add(1)
	m.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		defer m.wg.Done()
		done <- fn()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close shuts gossip down immediately, without telling the cluster (others
// will detect a failure; use Leave to depart gracefully), closes all watch
// channels and waits for the goroutines the Membership owns, including
// serf's and memberlist's (bounded; see doc.go). Close is idempotent; later
// calls return nil.
func (m *Membership) Close() error {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		ptrs := []string{pointerText(m.serf), pointerText(m.serf.Memberlist())}
		if err := m.serf.Shutdown(); err != nil {
			m.closeErr = fmt.Errorf("discovery: shut down gossip: %w", err)
		}
		m.cancel()
		m.wg.Wait()
		if left := waitGossipExit(ptrs, m.exitWait); left > 0 {
			m.log.Warn("gossip goroutines still running after close", slog.Int("count", left))
		}
		m.log.Info("gossip stopped")
	})
	return m.closeErr
}
