package discovery

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/serf/serf"
)

// eventBuffer is the capacity of the channel serf delivers member events on.
// Our consumer never blocks, so it only absorbs bursts.
const eventBuffer = 4096

// Membership is this node's view of the gossip cluster and its own
// advertisement. It is safe for concurrent use. Advertise, Withdraw,
// AdvertiseSpool, Join, Leave and the key operations block on the network;
// Lookup, Members, Name and GossipAddr do not. Close and Leave are safe to
// call more than once. Returned slices and maps are owned by the caller.
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

	tagMu    sync.Mutex // serializes changes of the local advertisement
	user     map[string]string
	services map[string]Service
	spool    *SpoolAd

	mu       sync.Mutex // guards everything below and wg.Add
	closed   bool
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
		set:      set,
		log:      logger,
		events:   make(chan serf.Event, eventBuffer),
		name:     cfg.NodeName,
		user:     map[string]string{},
		services: map[string]Service{},
		view:     map[string]*nodeView{},
		watchers: map[*watcher]struct{}{},
	}
	for k, v := range cfg.Tags {
		m.user[k] = v
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.closing = m.ctx.Done()
	if err := checkTagsSize(m.user); err != nil {
		m.cancel()
		return nil, err
	}
	sc, err := set.serfConfig(newGossipLogger(logger), m.events)
	if err != nil {
		m.cancel()
		return nil, err
	}
	sc.Tags = buildTags(m.user, nil, nil, "")
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
	m.self = advert{user: cloneMap(m.user), services: map[string]Service{}}
	m.view[m.name] = &nodeView{addr: m.addr, status: StatusAlive, adv: m.self}

	m.wg.Add(1)
	go m.consume()
	m.log.Info("gossip started", slog.String("endpoint", m.addr), slog.String("profile", cfg.Profile.String()), slog.Bool("encrypted", cfg.Key != nil))

	if len(cfg.Seeds) > 0 {
		seeds := slices.Clone(cfg.Seeds)
		if cfg.RetryJoin {
			m.wg.Add(1)
			go m.retryJoin(seeds)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), set.cfg.JoinTimeout)
			_, err := m.Join(ctx, seeds...)
			cancel()
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

// GossipAddr returns the "host:port" other nodes use to reach this node's
// gossip (the advertised address, with port 0 resolved to the bound port).
func (m *Membership) GossipAddr() string { return m.addr }

func (m *Membership) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// Join contacts the seeds ("host:port" gossip addresses). It retries rounds
// over all seeds with backoff until at least one answers, ctx ends, or — when
// ctx has no deadline — Config.JoinTimeout elapses. It returns the number of
// seeds contacted. The error wraps ErrJoin, and also ErrWrongKey when the
// failure looks like an encryption key mismatch (then it does not retry).
// A round can outlast ctx by up to the profile's TCP timeout (1 s
// ProfileLocal, 10 s ProfileLAN) per unreachable seed.
func (m *Membership) Join(ctx context.Context, seeds ...string) (int, error) {
	if len(seeds) == 0 {
		return 0, fmt.Errorf("%w: no seeds to join", ErrInvalid)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.set.cfg.JoinTimeout)
		defer cancel()
	}
	backoff := 50 * time.Millisecond
	for {
		if m.isClosed() {
			return 0, ErrClosed
		}
		n, err := m.serf.Join(seeds, true)
		if n > 0 {
			m.log.Info("joined cluster", slog.Int("contacted", n), slog.Any("seeds", seeds))
			return n, nil
		}
		if m.isClosed() {
			return 0, ErrClosed
		}
		err = flatten(err)
		if looksLikeKeyMismatch(err) {
			return 0, fmt.Errorf("%w: seeds %v: %w: %v", ErrJoin, seeds, ErrWrongKey, err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("%w: seeds %v: %v (%v)", ErrJoin, seeds, err, context.Cause(ctx))
		case <-m.closing:
			t.Stop()
			return 0, ErrClosed
		case <-t.C:
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// flatten turns serf's multi-line multierror into one line.
func flatten(err error) error {
	var me interface{ WrappedErrors() []error }
	if err == nil || !errors.As(err, &me) {
		return err
	}
	parts := make([]string, 0, len(me.WrappedErrors()))
	for _, e := range me.WrappedErrors() {
		parts = append(parts, e.Error())
	}
	return errors.New(strings.Join(parts, "; "))
}

// looksLikeKeyMismatch recognises memberlist's errors when the two sides do
// not share a key.
func looksLikeKeyMismatch(err error) bool {
	if err == nil {
		return false
	}
	s := strings.ToLower(err.Error())
	for _, frag := range []string{"decrypt", "encryption", "no installed keys", "encrypted", "not encrypted"} {
		if strings.Contains(s, frag) {
			return true
		}
	}
	return false
}

func (m *Membership) retryJoin(seeds []string) {
	defer m.wg.Done()
	backoff := 200 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(m.ctx, m.set.cfg.JoinTimeout)
		_, err := m.Join(ctx, seeds...)
		cancel()
		if err == nil || errors.Is(err, ErrClosed) {
			return
		}
		m.log.Warn("join failed, retrying", slog.Any("seeds", seeds), slog.Any("err", err), slog.Duration("backoff", backoff))
		t := time.NewTimer(backoff)
		select {
		case <-m.closing:
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// Advertise adds the service s to this node's advertisement, replacing any
// service of the same name, and gossips it. If the encoded advertisement
// would exceed the tag budget it returns a *TagsTooLargeError (matching
// ErrTagsTooLarge) and nothing changes. It blocks until the update has been
// broadcast or the broadcast timeout (2 s ProfileLocal, 5 s ProfileLAN)
// passed; in the latter case gossip still carries it and a warning is logged.
func (m *Membership) Advertise(s Service) error {
	if err := validateService(s); err != nil {
		return err
	}
	s = cloneService(s)
	return m.updateAd(func(svcs map[string]Service, sp **SpoolAd) bool {
		if old, ok := svcs[s.Name]; ok && old.Kind == s.Kind && slices.Equal(old.Endpoints, s.Endpoints) {
			return false
		}
		svcs[s.Name] = s
		return true
	})
}

// Withdraw removes the named service from this node's advertisement.
// Withdrawing a name that is not advertised is a no-op. Watchers see a
// Removed event with ReasonWithdrawn.
func (m *Membership) Withdraw(name string) error {
	return m.updateAd(func(svcs map[string]Service, sp **SpoolAd) bool {
		if _, ok := svcs[name]; !ok {
			return false
		}
		delete(svcs, name)
		return true
	})
}

// AdvertiseSpool replaces this node's spool advertisement: the endpoint its
// spool server listens on and the streams it serves. An empty endpoint
// withdraws the spool advertisement. Size errors are as for Advertise.
func (m *Membership) AdvertiseSpool(endpoint string, streams []string) error {
	var ad *SpoolAd
	if endpoint != "" {
		if err := validateSpool(endpoint, streams); err != nil {
			return err
		}
		ad = &SpoolAd{Endpoint: endpoint, Streams: slices.Clone(streams)}
	}
	return m.updateAd(func(svcs map[string]Service, sp **SpoolAd) bool {
		if ad == nil && *sp == nil {
			return false
		}
		if ad != nil && *sp != nil && (*sp).Endpoint == ad.Endpoint && slices.Equal((*sp).Streams, ad.Streams) {
			return false
		}
		*sp = ad
		return true
	})
}

// updateAd applies change to a copy of the local advertisement, checks its
// size, gossips it and only then commits it locally.
func (m *Membership) updateAd(change func(map[string]Service, **SpoolAd) bool) error {
	m.tagMu.Lock()
	defer m.tagMu.Unlock()
	if m.isClosed() {
		return ErrClosed
	}
	svcs := make(map[string]Service, len(m.services)+1)
	for k, v := range m.services {
		svcs[k] = v
	}
	sp := m.spool
	if !change(svcs, &sp) {
		return nil
	}
	tags := buildTags(m.user, svcs, sp, m.host)
	if err := checkTagsSize(tags); err != nil {
		return err
	}
	if err := m.serf.SetTags(tags); err != nil {
		if m.isClosed() {
			return ErrClosed
		}
		// The size was checked above, so serf has taken the new tags and
		// only waiting for the first broadcast failed (timeout); gossip
		// and push/pull will still carry them.
		m.log.Warn("advertisement broadcast not confirmed", slog.Any("err", err))
	}
	m.services, m.spool = svcs, sp
	adv := advert{user: cloneMap(m.user), services: make(map[string]Service, len(svcs)), spool: sp}
	for k, v := range svcs {
		adv.services[k] = v
	}
	m.mu.Lock()
	m.self = adv
	if nv := m.view[m.name]; nv != nil {
		m.setNodeLocked(m.name, &nodeView{addr: nv.addr, status: nv.status, adv: adv}, ReasonWithdrawn)
	}
	m.mu.Unlock()
	return nil
}

// consume drains serf's event channel. It never blocks on anything but the
// channel: watchers get coalesced updates through their own goroutines.
func (m *Membership) consume() {
	defer m.wg.Done()
	for {
		select {
		case <-m.closing:
			return
		case e := <-m.events:
			me, ok := e.(serf.MemberEvent)
			if !ok {
				continue
			}
			m.handleMemberEvent(me)
		}
	}
}

func (m *Membership) handleMemberEvent(me serf.MemberEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mem := range me.Members {
		host := mem.Addr.String()
		addr := net.JoinHostPort(host, strconv.Itoa(int(mem.Port)))
		var adv advert
		if mem.Name == m.name {
			adv = m.self
		} else {
			adv = decodeTags(mem.Tags, host)
		}
		if m.log.Enabled(context.Background(), slog.LevelDebug) {
			m.log.Debug("member event", slog.String("peer", mem.Name), slog.String("event", me.Type.String()), slog.String("endpoint", addr))
		}
		switch me.Type {
		case serf.EventMemberJoin, serf.EventMemberUpdate:
			if me.Type == serf.EventMemberJoin && mem.Name != m.name {
				m.log.Info("member joined", slog.String("peer", mem.Name), slog.String("endpoint", addr))
			}
			m.setNodeLocked(mem.Name, &nodeView{addr: addr, status: StatusAlive, adv: adv}, ReasonWithdrawn)
		case serf.EventMemberLeave:
			m.log.Info("member left", slog.String("peer", mem.Name), slog.String("endpoint", addr))
			m.setNodeLocked(mem.Name, &nodeView{addr: addr, status: StatusLeft, adv: adv}, ReasonLeft)
		case serf.EventMemberFailed:
			m.log.Warn("member failed", slog.String("peer", mem.Name), slog.String("endpoint", addr))
			m.setNodeLocked(mem.Name, &nodeView{addr: addr, status: StatusFailed, adv: adv}, ReasonFailed)
		case serf.EventMemberReap:
			m.setNodeLocked(mem.Name, nil, ReasonLeft)
		}
	}
}

// instancesOf lists what a node view offers under watch key k.
func (nv *nodeView) instance(node string, k watchKey) (Instance, bool) {
	if nv == nil || nv.status != StatusAlive {
		return Instance{}, false
	}
	if k.stream {
		sp := nv.adv.spool
		if sp == nil || !slices.Contains(sp.Streams, k.name) {
			return Instance{}, false
		}
		return Instance{Node: node, Addr: nv.addr, Service: Service{Name: k.name, Kind: SpoolKind, Endpoints: []string{sp.Endpoint}}}, true
	}
	s, ok := nv.adv.services[k.name]
	if !ok {
		return Instance{}, false
	}
	return Instance{Node: node, Addr: nv.addr, Service: cloneService(s)}, true
}

// setNodeLocked replaces the view of node and tells interested watchers.
// reason is used for instances that disappear while the node stays alive.
func (m *Membership) setNodeLocked(node string, nv *nodeView, reason Reason) {
	old := m.view[node]
	if nv == nil {
		delete(m.view, node)
	} else {
		m.view[node] = nv
	}
	for w := range m.watchers {
		inst, ok := nv.instance(node, w.key)
		_, had := old.instance(node, w.key)
		if !ok && !had {
			continue
		}
		r := ReasonNone
		if !ok {
			r = reason
			if nv != nil && nv.status == StatusAlive {
				r = ReasonWithdrawn
			}
		}
		w.push(node, inst, ok, r)
	}
}

// Lookup returns the live instances of the named service, including this
// node's own (nil after Close), nearest first: the local node, then by estimated round-trip
// time, nodes without an estimate last, ties by node name.
func (m *Membership) Lookup(name string) []Instance {
	return m.lookup(watchKey{name: name})
}

// LookupStream returns the live nodes whose spool serves stream, as instances
// whose Service is {Name: stream, Kind: SpoolKind, Endpoints: [spool endpoint]},
// ordered as Lookup.
func (m *Membership) LookupStream(stream string) []Instance {
	return m.lookup(watchKey{name: stream, stream: true})
}

func (m *Membership) lookup(k watchKey) []Instance {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	var out []Instance
	for node, nv := range m.view {
		if inst, ok := nv.instance(node, k); ok {
			out = append(out, inst)
		}
	}
	m.mu.Unlock()
	for i := range out {
		out[i].RTT = m.rtt(out[i].Node)
	}
	m.sortInstances(out)
	return out
}

func (m *Membership) sortInstances(out []Instance) {
	rank := func(in Instance) int {
		switch {
		case in.Node == m.name:
			return 0
		case in.RTT > 0:
			return 1
		}
		return 2
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := rank(out[i]), rank(out[j])
		if ri != rj {
			return ri < rj
		}
		if out[i].RTT != out[j].RTT {
			return out[i].RTT < out[j].RTT
		}
		return out[i].Node < out[j].Node
	})
}

// rtt estimates the round-trip time to node from serf's network
// coordinates; 0 when unknown (and for the local node).
func (m *Membership) rtt(node string) time.Duration {
	if node == m.name {
		return 0
	}
	self, err := m.serf.GetCoordinate()
	if err != nil {
		return 0
	}
	other, ok := m.serf.GetCachedCoordinate(node)
	if !ok || !self.IsCompatibleWith(other) {
		return 0
	}
	return self.DistanceTo(other)
}

// Status is a member's state as seen by this node.
type Status int

// Member states. serf does not expose memberlist's suspicion, so a suspected
// node is reported alive until it is declared failed.
const (
	StatusUnknown Status = iota
	StatusAlive
	StatusLeaving
	StatusLeft
	StatusFailed
)

// String returns "alive", "leaving", "left", "failed" or "unknown".
func (s Status) String() string {
	switch s {
	case StatusAlive:
		return "alive"
	case StatusLeaving:
		return "leaving"
	case StatusLeft:
		return "left"
	case StatusFailed:
		return "failed"
	}
	return "unknown"
}

func statusOf(s serf.MemberStatus) Status {
	switch s {
	case serf.StatusAlive:
		return StatusAlive
	case serf.StatusLeaving:
		return StatusLeaving
	case serf.StatusLeft:
		return StatusLeft
	case serf.StatusFailed:
		return StatusFailed
	}
	return StatusUnknown
}

// Member describes one node of the cluster. Tags holds only user tags;
// Services and Spool are the decoded advertisement.
type Member struct {
	Name     string
	Addr     string // gossip host:port
	Status   Status
	Tags     map[string]string
	Services []Service
	Spool    *SpoolAd
	RTT      time.Duration // estimated round-trip time; 0 if unknown or local
}

// Members returns every member serf knows, including failed and left ones
// until they are reaped, sorted by name.
func (m *Membership) Members() []Member {
	if m.isClosed() {
		return nil
	}
	mems := m.serf.Members()
	m.mu.Lock()
	self := m.self
	m.mu.Unlock()
	out := make([]Member, 0, len(mems))
	for _, mem := range mems {
		host := mem.Addr.String()
		adv := self
		if mem.Name != m.name {
			adv = decodeTags(mem.Tags, host)
		}
		var sp *SpoolAd
		if adv.spool != nil {
			c := *adv.spool
			c.Streams = slices.Clone(c.Streams)
			sp = &c
		}
		out = append(out, Member{
			Name:     mem.Name,
			Addr:     net.JoinHostPort(host, strconv.Itoa(int(mem.Port))),
			Status:   statusOf(mem.Status),
			Tags:     cloneMap(adv.user),
			Services: sortedServices(adv.services),
			Spool:    sp,
			RTT:      m.rtt(mem.Name),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Leave broadcasts that this node is leaving, so that others report it left
// rather than failed, waits for the broadcast to propagate (bounded by ctx
// and the profile's broadcast timeout), then closes the membership. It
// returns ctx's error if ctx ended first; the membership is closed either way.
func (m *Membership) Leave(ctx context.Context) error {
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
		done <- m.serf.Leave()
	}()
	var err error
	select {
	case err = <-done:
		if err != nil {
			err = fmt.Errorf("discovery: leave: %w", err)
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	m.log.Info("left cluster")
	if cerr := m.Close(); err == nil && cerr != nil && !errors.Is(cerr, ErrClosed) {
		err = cerr
	}
	return err
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

// InstallKey installs key in the key ring of every member (it does not
// start using it for sending). Key operations need Config.Key; otherwise they
// return ErrNoEncryption. If any member fails or does not answer, the error
// is a *KeyError.
func (m *Membership) InstallKey(ctx context.Context, key []byte) error {
	_, err := m.keyOp(ctx, "install", func(km *serf.KeyManager) (*serf.KeyResponse, error) {
		return km.InstallKey(base64.StdEncoding.EncodeToString(key))
	})
	return err
}

// UseKey makes an installed key the primary (sending) key on every member.
func (m *Membership) UseKey(ctx context.Context, key []byte) error {
	_, err := m.keyOp(ctx, "use", func(km *serf.KeyManager) (*serf.KeyResponse, error) {
		return km.UseKey(base64.StdEncoding.EncodeToString(key))
	})
	return err
}

// RemoveKey removes a key that is not primary from every member.
func (m *Membership) RemoveKey(ctx context.Context, key []byte) error {
	_, err := m.keyOp(ctx, "remove", func(km *serf.KeyManager) (*serf.KeyResponse, error) {
		return km.RemoveKey(base64.StdEncoding.EncodeToString(key))
	})
	return err
}

// ListKeys returns, for each key installed anywhere in the cluster (base64
// encoded), how many members hold it.
func (m *Membership) ListKeys(ctx context.Context) (map[string]int, error) {
	resp, err := m.keyOp(ctx, "list", func(km *serf.KeyManager) (*serf.KeyResponse, error) {
		return km.ListKeys()
	})
	if resp == nil {
		return nil, err
	}
	return cloneCounts(resp.Keys), err
}

func cloneCounts(in map[string]int) map[string]int {
	out := make(map[string]int, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// keyOp runs a serf key-ring query. serf's call cannot be cancelled, so it
// runs in an owned goroutine that Close waits for (it ends after the query
// timeout at most).
func (m *Membership) keyOp(ctx context.Context, op string, f func(*serf.KeyManager) (*serf.KeyResponse, error)) (*serf.KeyResponse, error) {
	if m.set.cfg.Key == nil {
		return nil, ErrNoEncryption
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	m.wg.Add(1)
	m.mu.Unlock()
	type result struct {
		resp *serf.KeyResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		defer m.wg.Done()
		r, err := f(m.serf.KeyManager())
		done <- result{r, err}
	}()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-m.closing:
		return nil, ErrClosed
	case r := <-done:
		if r.resp == nil {
			return nil, fmt.Errorf("discovery: key %s: %w", op, r.err)
		}
		if r.err != nil || r.resp.NumErr > 0 || r.resp.NumResp < r.resp.NumNodes {
			return r.resp, &KeyError{Op: op, NumNodes: r.resp.NumNodes, NumResp: r.resp.NumResp, NumErr: r.resp.NumErr, Messages: r.resp.Messages}
		}
		return r.resp, nil
	}
}
