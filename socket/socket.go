package socket

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/internal/zmtp"
)

// Socket is a ZeroMQ socket of one Kind, speaking ZMTP 3 over tcp://,
// ipc:// and inproc:// endpoints.
//
// A Socket is safe for concurrent use, but REQ and REP keep a single
// send/receive state, so concurrent Send or Recv calls on them interleave
// unpredictably. Send and Recv block as documented on each; Bind, Connect
// and their inverses do not block on the network; Subscribe and
// Unsubscribe never block. Close may be called more than once.
type Socket struct {
	kind Kind
	cfg  Config
	log  *slog.Logger
	hs   zmtp.Config

	closed  atomic.Bool
	closing chan struct{} // closed by Close

	mu        sync.Mutex
	listeners map[string]*listener // by resolved endpoint
	dialers   map[string][]*dialer
	pending   map[net.Conn]struct{} // connections still handshaking
	subs      subTable              // SUB/XSUB: our subscriptions (changed under mu)
	xsubs     subSet                // XPUB: union of peers' subscriptions
	peersMu   sync.Mutex            // guards writes of peers and byID
	byID      map[string]*peer      // ROUTER

	peers   atomic.Pointer[[]*peer]
	mySubs  atomic.Pointer[subTable] // SUB: the table the reader filters with (&subs)
	rr      atomic.Uint32
	waiters atomic.Int32
	room    chan struct{}
	nextID  atomic.Uint32

	// Incoming side: each peer has its own bounded queue (peer.inq); Recv
	// visits them round-robin. The queues of peers that went away with
	// messages still in them wait in departed, oldest first, and are read
	// from in place (so a Recv that still holds the old peer list pops from
	// the same queue, in order); XPUB's own unsubscriptions wait in left.
	rrIn     atomic.Uint32
	rwaiters atomic.Int32
	rwakes   atomic.Int64 // receivers woken while blocked (for tests)

	noDropMu sync.Mutex // PubNoDrop: checking and queueing are one step
	inReady  chan struct{}
	leftN    atomic.Int32 // len(departed) + len(left), a hint for the fast path
	leftMu   sync.Mutex
	departed []*peer
	left     []inMsg

	evMu     sync.Mutex
	evClosed bool
	events   chan Event

	reqMu      sync.Mutex
	reqPeer    *peer
	reqWaiting bool
	reqSending bool // a Send is on its way (reqMu is not held while it blocks)
	reqID      uint32

	repMu      sync.Mutex
	repPeer    *peer
	repEnv     [][]byte
	repPending bool

	st struct {
		sent, received, dropped, eventsDropped, hsFail, disconnects, retries, tooLarge atomic.Uint64
	}

	wg sync.WaitGroup
}

type inMsg struct {
	p *peer
	m Msg
}

type listener struct {
	l        net.Listener
	ep       string
	resolved string
	done     chan struct{}
}

type dialer struct {
	ep     endpoint
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	conn   net.Conn
}

// New returns a socket of the given kind. It validates cfg, refusing with
// ErrNotSupported an option that only another kind uses (PubNoDrop for
// PUB/XPUB, RouterMandatory and RouterHandover for ROUTER, ReqRelaxed and
// ReqCorrelate for REQ), and starts no goroutine until Bind or Connect.
func New(kind Kind, cfg Config) (*Socket, error) {
	if !kind.valid() {
		return nil, fmt.Errorf("%w: kind %d", ErrNotSupported, int(kind))
	}
	c, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	if err := c.checkKind(kind); err != nil {
		return nil, err
	}
	s := &Socket{
		kind:      kind,
		cfg:       c,
		log:       c.Logger.With("component", "socket", "kind", kind.String()),
		closing:   make(chan struct{}),
		listeners: make(map[string]*listener),
		dialers:   make(map[string][]*dialer),
		pending:   make(map[net.Conn]struct{}),
		byID:      make(map[string]*peer),
		room:      make(chan struct{}, 1),
		inReady:   make(chan struct{}, 1),
		events:    make(chan Event, 256),
	}
	s.hs = zmtp.Config{
		SocketType: kind.String(),
		Identity:   c.Identity,
		Username:   c.PlainUsername,
		Password:   c.PlainPassword,
		Auth:       c.PlainAuth,
	}
	s.nextID.Store(rand.Uint32())
	empty := []*peer{}
	s.peers.Store(&empty)
	s.mySubs.Store(&s.subs)
	return s, nil
}

// Kind returns the socket's kind.
func (s *Socket) Kind() Kind { return s.kind }

// Events returns the socket's event channel. It is buffered (256 events);
// when it is full new events are dropped and counted in
// Stats.EventsDropped. It is closed when Close returns.
func (s *Socket) Events() <-chan Event { return s.events }

func (s *Socket) emit(e Event) {
	s.evMu.Lock()
	if !s.evClosed {
		select {
		case s.events <- e:
		default:
			s.st.eventsDropped.Add(1)
		}
	}
	s.evMu.Unlock()
}

// Stats returns a snapshot of the socket's counters.
func (s *Socket) Stats() Stats {
	return Stats{
		Sent:              s.st.sent.Load(),
		Received:          s.st.received.Load(),
		Dropped:           s.st.dropped.Load(),
		EventsDropped:     s.st.eventsDropped.Load(),
		Peers:             len(*s.peers.Load()),
		HandshakeFailures: s.st.hsFail.Load(),
		Disconnects:       s.st.disconnects.Load(),
		ConnectRetries:    s.st.retries.Load(),
		TooLarge:          s.st.tooLarge.Load(),
	}
}

// Bind listens on endpoint and returns the resolved endpoint (with the
// actual port for tcp://host:0). Supported forms: tcp://host:port
// (host may be * for all interfaces, port 0 or * for any), ipc://path (a
// stale socket file nobody listens on is removed) and inproc://name.
func (s *Socket) Bind(ep string) (string, error) {
	e, err := parseEndpoint(ep, true)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return "", ErrClosed
	}
	l, resolved, err := listen(e)
	if err != nil {
		return "", err
	}
	ln := &listener{l: l, ep: ep, resolved: resolved, done: make(chan struct{})}
	s.listeners[resolved] = ln
	s.wg.Add(1)
	go s.acceptLoop(ln)
	s.log.Info("listening", "endpoint", resolved)
	s.emit(Event{Type: EventListening, Endpoint: resolved})
	return resolved, nil
}

// Unbind stops listening on an endpoint Bind returned, or on every
// listener bound with the endpoint given to Bind. Established connections
// stay up.
func (s *Socket) Unbind(ep string) error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return ErrClosed
	}
	var lns []*listener
	for k, ln := range s.listeners {
		if ln.ep == ep || ln.resolved == ep {
			lns = append(lns, ln)
			delete(s.listeners, k)
		}
	}
	s.mu.Unlock()
	if len(lns) == 0 {
		return fmt.Errorf("%w: %s is not bound", ErrBadEndpoint, ep)
	}
	for _, ln := range lns {
		ln.l.Close()
		<-ln.done
	}
	return nil
}

func (s *Socket) acceptLoop(ln *listener) {
	defer s.wg.Done()
	defer close(ln.done)
	var delay time.Duration
	for {
		c, err := ln.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.closed.Load() {
				return
			}
			// Out of file descriptors and the like: back off briefly.
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else if delay < time.Second {
				delay *= 2
			}
			s.log.Warn("accept failed", "endpoint", ln.resolved, "err", err)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-s.closing:
				t.Stop()
				return
			}
			continue
		}
		delay = 0
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(c, ln.resolved, false, nil)
		}()
	}
}

// Connect starts connecting to endpoint in the background and returns at
// once; the connection is retried with exponential backoff whenever it
// fails or drops, until Disconnect or Close. It returns an error only for
// a malformed endpoint or a closed socket.
func (s *Socket) Connect(ep string) error {
	e, err := parseEndpoint(ep, false)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &dialer{ep: e, ctx: ctx, cancel: cancel}
	s.dialers[ep] = append(s.dialers[ep], d)
	s.wg.Add(1)
	go s.dialLoop(d, ep)
	return nil
}

// Disconnect stops connecting to an endpoint given to Connect and closes
// the connections made to it, discarding their queued messages.
func (s *Socket) Disconnect(ep string) error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return ErrClosed
	}
	ds := s.dialers[ep]
	delete(s.dialers, ep)
	s.mu.Unlock()
	if len(ds) == 0 {
		return fmt.Errorf("%w: %s is not connected", ErrBadEndpoint, ep)
	}
	for _, d := range ds {
		d.stop()
	}
	return nil
}

func (d *dialer) stop() {
	d.cancel()
	d.mu.Lock()
	if d.conn != nil {
		d.conn.Close()
	}
	d.mu.Unlock()
}

func (s *Socket) backoff(n int) time.Duration {
	d := s.cfg.ReconnectInterval
	for i := 0; i < n && d < s.cfg.ReconnectIntervalMax; i++ {
		d *= 2
	}
	if d > s.cfg.ReconnectIntervalMax {
		d = s.cfg.ReconnectIntervalMax
	}
	// Jitter: uniformly in [d/2, d].
	half := int64(d / 2)
	if half > 0 {
		d = time.Duration(half + rand.Int64N(half+1))
	}
	return d
}

func (s *Socket) dialLoop(d *dialer, ep string) {
	defer s.wg.Done()
	failures := 0
	for {
		c, err := dial(d.ctx, d.ep)
		if err == nil {
			d.mu.Lock()
			if d.ctx.Err() != nil {
				d.mu.Unlock()
				c.Close()
				return
			}
			d.conn = c
			d.mu.Unlock()
			established := s.serveConn(c, ep, true, d)
			d.mu.Lock()
			d.conn = nil
			d.mu.Unlock()
			if established {
				failures = 0
			} else {
				failures++
			}
		} else {
			if d.ctx.Err() != nil {
				return
			}
			failures++
			s.st.retries.Add(1)
			s.emit(Event{Type: EventConnectRetried, Endpoint: ep, Err: err})
		}
		if d.ctx.Err() != nil || s.closed.Load() {
			return
		}
		t := time.NewTimer(s.backoff(failures - 1))
		select {
		case <-t.C:
		case <-d.ctx.Done():
			t.Stop()
			return
		case <-s.closing:
			t.Stop()
			return
		}
	}
}

// Close stops listening and dialing, gives each connection up to
// Config.Linger to flush its queued messages, closes every connection and
// returns once all the socket's goroutines have exited. Blocked Send and
// Recv calls return ErrClosed. Close is idempotent.
func (s *Socket) Close() error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed.Store(true)
	close(s.closing)
	for k, ln := range s.listeners {
		ln.l.Close()
		delete(s.listeners, k)
	}
	for k, ds := range s.dialers {
		for _, d := range ds {
			d.cancel()
		}
		delete(s.dialers, k)
	}
	for c := range s.pending {
		c.Close()
	}
	s.mu.Unlock()
	// A writer blocked on a peer that stopped reading must give up when
	// the linger time is over.
	deadline := time.Now().Add(s.cfg.Linger)
	for _, p := range *s.peers.Load() {
		if s.cfg.Linger < 0 {
			p.shutdown(ErrClosed)
		} else {
			_ = p.conn.SetWriteDeadline(deadline)
		}
	}
	s.wg.Wait()
	s.evMu.Lock()
	s.evClosed = true
	close(s.events)
	s.evMu.Unlock()
	return nil
}

// ctxFor applies a default timeout when ctx has none.
func ctxFor(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		if _, ok := ctx.Deadline(); !ok {
			return context.WithTimeout(ctx, d)
		}
	}
	return ctx, func() {}
}

func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return timeoutError{cause: context.DeadlineExceeded}
	}
	return err
}

// ---- peer registry ----

func (s *Socket) addPeer(p *peer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	old := *s.peers.Load()
	if s.kind == Pair && len(old) > 0 {
		return fmt.Errorf("socket: PAIR already has a peer")
	}
	if s.kind == Router {
		if prev, ok := s.byID[p.id]; ok {
			if !s.cfg.RouterHandover {
				return fmt.Errorf("%w: identity %q is already in use", ErrIdentityInUse, p.id)
			}
			// Handover: the newest connection with an identity wins.
			prev.shutdown(fmt.Errorf("socket: identity taken over by a new connection"))
		}
		s.byID[p.id] = p
	}
	if s.kind == Sub || s.kind == XSub {
		// Under s.mu, like every change of s.subs: the peer gets each
		// subscription either here or as a later change, never both.
		s.replaySubs(p)
	}
	n := make([]*peer, 0, len(old)+1)
	n = append(n, old...)
	n = append(n, p)
	s.peers.Store(&n)
	return nil
}

func (s *Socket) removePeer(p *peer) {
	s.peersMu.Lock()
	old := *s.peers.Load()
	n := make([]*peer, 0, len(old))
	for _, q := range old {
		if q != p {
			n = append(n, q)
		}
	}
	s.peers.Store(&n)
	if s.kind == Router && s.byID[p.id] == p {
		delete(s.byID, p.id)
	}
	s.peersMu.Unlock()
	// Keep what the peer sent before it went away.
	s.keepDeparted(p)
	if s.kind == XPub {
		for _, t := range p.subs.topics() {
			s.xpubUpdate(p, []byte(t), false, true)
		}
	}
	s.wake()
}

// keepDeparted keeps the queue of a peer that went away for Recv, if it
// still holds messages. Messages kept from departed peers are bounded by
// RecvHWM like any peer's queue, so a peer that reconnects again and again
// cannot grow memory past it: beyond it the newest are dropped and counted
// in Stats.Dropped.
func (s *Socket) keepDeparted(p *peer) {
	k := p.inq.len()
	if k == 0 {
		return
	}
	s.leftMu.Lock()
	kept := len(s.left)
	for _, q := range s.departed {
		kept += q.inq.len()
	}
	if over := kept + k - s.cfg.RecvHWM; over > 0 {
		s.st.dropped.Add(uint64(p.inq.dropNewest(over)))
	}
	if p.inq.len() > 0 {
		s.departed = append(s.departed, p)
		s.leftN.Add(1)
	}
	s.leftMu.Unlock()
	s.wakeRecv()
}

// pushLeft keeps a message not tied to a live peer (XPUB's own
// unsubscriptions) for Recv, bounded by RecvHWM; beyond it messages are
// dropped and counted in Stats.Dropped.
func (s *Socket) pushLeft(im inMsg) {
	s.leftMu.Lock()
	if len(s.left) >= s.cfg.RecvHWM {
		s.leftMu.Unlock()
		s.st.dropped.Add(1)
		return
	}
	s.left = append(s.left, im)
	s.leftN.Add(1)
	s.leftMu.Unlock()
	s.wakeRecv()
}

func (s *Socket) popLeft() (inMsg, bool) {
	if s.leftN.Load() == 0 {
		return inMsg{}, false
	}
	s.leftMu.Lock()
	defer s.leftMu.Unlock()
	for len(s.departed) > 0 {
		p := s.departed[0]
		if m, ok := p.inq.pop(); ok {
			return inMsg{p: p, m: m}, true
		}
		s.departed[0] = nil
		s.departed = s.departed[1:]
		s.leftN.Add(-1)
	}
	if len(s.left) == 0 {
		return inMsg{}, false
	}
	im := s.left[0]
	s.left[0] = inMsg{}
	s.left = s.left[1:]
	s.leftN.Add(-1)
	return im, true
}

func (s *Socket) wakeRecv() { signal(s.inReady) }

func (s *Socket) wake() { signal(s.room) }

func subMsg(subscribe bool, topic []byte) Msg {
	b := make([]byte, 1+len(topic))
	if subscribe {
		b[0] = 1
	}
	copy(b[1:], topic)
	return Msg{Frames: [][]byte{b}}
}

// genID returns a ROUTER identity for a peer that did not send one: a zero
// byte followed by a 32-bit counter, as libzmq does.
func (s *Socket) genID() string {
	var b [5]byte
	binary.BigEndian.PutUint32(b[1:], s.nextID.Add(1))
	return string(b[:])
}
