package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/socket"
)

// Handler serves one request. ctx carries the caller's deadline (when the
// caller had one) and ends when the server closes. The returned reply
// belongs to the server. An error reaches the caller as an *Error: return
// one (see Errorf) to choose its Code. A Handler is called concurrently,
// up to ServerConfig.Concurrency at once.
type Handler func(ctx context.Context, req []byte) ([]byte, error)

// Advertiser publishes the service in the mesh. *discovery.Membership and
// discoverytest's *Node implement it.
type Advertiser interface {
	Advertise(s discovery.Service) error
	Withdraw(name string) error
}

// MaxConcurrency bounds ServerConfig.Concurrency, and four times it
// QueueSize.
const MaxConcurrency = 1 << 16

// ServerConfig configures a Server. Service and Handler are required.
type ServerConfig struct {
	// Service is the name the server is advertised under.
	Service string
	// Handler serves the requests.
	Handler Handler
	// Concurrency is how many requests run at once. Default 64, at most
	// MaxConcurrency (each has a goroutine waiting for requests).
	Concurrency int
	// QueueSize is how many accepted requests may wait for a free handler;
	// beyond it requests are refused with StatusOverloaded and the client
	// tries another instance. Default 4 × Concurrency.
	QueueSize int
	// CacheWindow is how long the reply to a request with an idempotency
	// key is kept for retries. Default 1 minute.
	CacheWindow time.Duration
	// CacheSize caps the number of cached replies; the oldest go first.
	// Default 100 000.
	CacheSize int
	// DrainGrace is how long Shutdown keeps answering StatusUnavailable
	// after withdrawing the advertisement (at least, and until in-flight
	// requests are done), so that clients that have not yet heard of the
	// withdrawal retry elsewhere at once. Default 200 ms; ctx bounds it.
	DrainGrace time.Duration

	// Listener, if set, is a bound ROUTER socket to serve on, instead of
	// making one from Endpoints and Socket. The Server owns it from then
	// on and closes it.
	Listener *socket.Socket
	// Endpoints to bind the ROUTER socket to. Default tcp://127.0.0.1:0.
	Endpoints []string
	// Socket configures the ROUTER socket. Its Logger defaults to Logger.
	Socket socket.Config

	// Discovery, if set, is where the service is advertised (with the
	// bound endpoints, or AdvertiseEndpoints) and withdrawn by Shutdown.
	// Leave it nil when the caller advertises (as Node.Serve does); then
	// set Withdraw to make Shutdown withdraw first.
	Discovery Advertiser
	// AdvertiseEndpoints replaces the bound endpoints in the advertisement
	// (for a bind on 0.0.0.0, say).
	AdvertiseEndpoints []string
	// NoLocalIPC keeps the server off unix sockets. By default a server
	// advertised through Discovery also listens, for clients on its own
	// host, on the unix socket twin of each tcp endpoint it advertises
	// (on its own socket, or on Listener): tcp-HOST-PORT-nNET.sock in
	// LocalIPCDir, not advertised. A client of the same user on the same
	// host finds it there and uses it instead of tcp loopback, which
	// takes less CPU and time a call (ClientConfig.NoLocalIPC). No twin is
	// made when Socket has an Authenticator (an address rule refuses unix
	// peers; with a Listener, set NoLocalIPC yourself if its
	// Authenticator would), when the directory is not private, or where
	// the path would be too long for a unix socket.
	NoLocalIPC bool
	// LocalIPCDir is the directory of the twins (see NoLocalIPC); clients
	// look in theirs, so the two must agree. Default: fastmq-<uid> in
	// os.TempDir(), made with mode 0700. It must be owned by the
	// process's user and writable by nobody else: whoever may create a
	// file there could stand in for a server.
	LocalIPCDir string
	// Node is this node's name, reported in errors' Instance field. Optional.
	Node string

	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
}

// ServerStats are a server's counters since it started.
type ServerStats struct {
	Requests    uint64 `json:"requests"`     // requests received, malformed ones included
	Handled     uint64 `json:"handled"`      // handler runs
	Errors      uint64 `json:"errors"`       // handler runs that returned an error
	CacheHits   uint64 `json:"cache_hits"`   // requests answered from the reply cache (or joined to a running copy)
	Expired     uint64 `json:"expired"`      // requests dropped because their deadline passed before they ran
	Overloaded  uint64 `json:"overloaded"`   // requests refused because the queue was full
	Unavailable uint64 `json:"unavailable"`  // requests refused while shutting down
	BadRequests uint64 `json:"bad_requests"` // malformed requests
	SendsFailed uint64 `json:"sends_failed"` // replies that could not be queued
	InFlight    int    `json:"in_flight"`    // requests accepted and not yet answered
	Cached      int    `json:"cached"`       // entries in the reply cache
}

// Server serves a Handler over a ROUTER socket, as the service Service.
//
// A Server is safe for concurrent use. New starts it: Concurrency + 1
// goroutines receive, each running the handler on what it received while
// fewer than Concurrency run (dispatch.go). Close stops at once
// (running handlers see their ctx end; their replies are dropped) and
// Shutdown drains; both are idempotent and return after every goroutine
// has exited.
type Server struct {
	cfg  ServerConfig
	log  *slog.Logger
	sock *socket.Socket
	eps  []string
	// local are the unix socket twins bound (listenLocal).
	local []string

	ctx    context.Context // ends on Close; handlers' parent
	cancel context.CancelFunc
	jobs   chan job
	wg     sync.WaitGroup // the receivers

	idle chan struct{} // receives after every finished request, for Shutdown

	mu       sync.Mutex // guards the fields below
	cache    *replyCache
	nIn      int  // requests accepted and not yet answered or dropped
	busy     int  // receivers running a request (at most Concurrency)
	draining bool // Shutdown or Close began: refuse new requests
	closed   bool

	requests, handled, errs, hits, expired, overloaded, unavailable, bad, sendsFailed atomic.Uint64
}

// job is one accepted request.
type job struct {
	env      [][]byte
	plain    bool // from a plain REQ client: no header
	req      request
	body     []byte
	deadline time.Time // zero: none
	key      *cacheKey
}

// NewServer binds (or takes Config.Listener), advertises the service if
// Config.Discovery is set and starts serving.
func NewServer(cfg ServerConfig) (*Server, error) {
	switch {
	case cfg.Service == "":
		return nil, errors.New("rpc: ServerConfig.Service is required")
	case cfg.Handler == nil:
		return nil, errors.New("rpc: ServerConfig.Handler is required")
	case cfg.Concurrency < 0, cfg.QueueSize < 0, cfg.CacheSize < 0, cfg.CacheWindow < 0, cfg.DrainGrace < 0:
		return nil, errors.New("rpc: negative ServerConfig value")
	case cfg.Concurrency > MaxConcurrency || cfg.QueueSize > 4*MaxConcurrency:
		return nil, fmt.Errorf("rpc: ServerConfig.Concurrency above %d or QueueSize above %d", MaxConcurrency, 4*MaxConcurrency)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 64
	}
	if cfg.QueueSize == 0 {
		cfg.QueueSize = 4 * cfg.Concurrency
	}
	if cfg.CacheWindow == 0 {
		cfg.CacheWindow = time.Minute
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = 100_000
	}
	if cfg.DrainGrace == 0 {
		cfg.DrainGrace = 200 * time.Millisecond
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:   cfg,
		log:   lg.With("component", "rpc-server", "service", cfg.Service),
		jobs:  make(chan job, cfg.QueueSize),
		idle:  make(chan struct{}, 1),
		cache: newReplyCache(cfg.CacheWindow, cfg.CacheSize),
	}
	if cfg.Listener != nil {
		if cfg.Listener.Kind() != socket.Router {
			return nil, fmt.Errorf("rpc: Listener is a %s socket, want ROUTER", cfg.Listener.Kind())
		}
		s.sock = cfg.Listener
		s.eps = append([]string(nil), cfg.AdvertiseEndpoints...)
	} else {
		if err := s.listen(); err != nil {
			return nil, err
		}
	}
	if cfg.Discovery != nil {
		if err := s.advertise(); err != nil {
			s.sock.Close()
			return nil, fmt.Errorf("rpc: advertise %q: %w", cfg.Service, err)
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	// One receiver more than handlers may run: while every slot is busy,
	// the one left queues or refuses what arrives.
	s.wg.Add(cfg.Concurrency + 1)
	for range cfg.Concurrency + 1 {
		go s.receive()
	}
	s.log.Info("rpc server started", "endpoint", s.eps, "concurrency", cfg.Concurrency)
	return s, nil
}

// listen makes and binds the ROUTER socket.
func (s *Server) listen() error {
	sc := s.cfg.Socket
	if sc.Logger == nil {
		sc.Logger = s.cfg.Logger
	}
	sock, err := socket.New(socket.Router, sc)
	if err != nil {
		return err
	}
	eps := s.cfg.Endpoints
	if len(eps) == 0 {
		eps = []string{"tcp://127.0.0.1:0"}
	}
	var bound []string
	for _, ep := range eps {
		b, err := sock.Bind(ep)
		if err != nil {
			sock.Close()
			return fmt.Errorf("rpc: bind %s: %w", ep, err)
		}
		bound = append(bound, b)
	}
	if len(s.cfg.AdvertiseEndpoints) > 0 {
		bound = append([]string(nil), s.cfg.AdvertiseEndpoints...)
	}
	s.sock, s.eps = sock, bound
	return nil
}

// Endpoints returns the advertised endpoints. The caller owns the slice.
func (s *Server) Endpoints() []string { return append([]string(nil), s.eps...) }

// Stats returns the server's counters.
func (s *Server) Stats() ServerStats {
	s.mu.Lock()
	inflight, cached := s.nIn, s.cache.len()
	s.mu.Unlock()
	return ServerStats{
		Requests: s.requests.Load(), Handled: s.handled.Load(), Errors: s.errs.Load(),
		CacheHits: s.hits.Load(), Expired: s.expired.Load(), Overloaded: s.overloaded.Load(),
		Unavailable: s.unavailable.Load(), BadRequests: s.bad.Load(), SendsFailed: s.sendsFailed.Load(),
		InFlight: inflight, Cached: cached,
	}
}

// maxWaiters bounds the copies of one keyed call (a retry that arrives
// while the first copy runs) that wait for its reply.
const maxWaiters = 8

// run serves one request: drops it if it expired, else runs the handler
// and replies to it and to the copies that arrived meanwhile. now is the
// time, or zero to read the clock; a, the receiver's arena.
func (s *Server) run(j job, now time.Time, a *arena) {
	if now.IsZero() {
		now = time.Now()
	}
	if !j.deadline.IsZero() && !now.Before(j.deadline) {
		s.expired.Add(1)
		if j.key != nil {
			s.mu.Lock()
			ws := s.cache.abandon(*j.key)
			s.mu.Unlock()
			// Copies that joined it may still have time: the handler did
			// not run, so they may try again.
			for _, w := range ws {
				s.sendReply(w.env, w.id, StatusUnavailable)
			}
		}
		return // the caller has given up: never run it
	}
	var ctx context.Context = s.ctx
	if !j.deadline.IsZero() {
		cc := a.callCtx(s.ctx, j.deadline)
		defer cc.release()
		ctx = cc
	}
	s.handled.Add(1)
	reply, err := s.call(ctx, j.body)
	if s.ctx.Err() != nil {
		return // closed: the reply cannot be sent
	}
	if j.plain {
		if err != nil {
			s.errs.Add(1)
			code, msg := errorParts(err)
			s.replyPlainError(j.env, code, msg)
			return
		}
		s.send(j.env, nil, [][]byte{reply})
		return
	}
	var fr [2][]byte // on the stack: sendReply copies the frames
	st, frames := StatusOK, fr[:1]
	fr[0] = reply
	if err != nil {
		s.errs.Add(1)
		code, msg := errorParts(err)
		st, frames = StatusError, fr[:2]
		fr[0], fr[1] = []byte(code), []byte(msg)
	}
	var waiters []waiter
	if j.key != nil {
		kept := slices.Clone(frames)
		s.mu.Lock()
		waiters = s.cache.finish(*j.key, st, kept, time.Now())
		s.mu.Unlock()
	}
	s.sendReplyIn(a, j.env, j.req.id, st, frames...)
	for _, w := range waiters {
		s.sendReplyIn(a, w.env, w.id, st, frames...)
	}
}

// call runs the handler, turning a panic into an error.
func (s *Server) call(ctx context.Context, req []byte) (reply []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("rpc handler panicked", "panic", p)
			reply, err = nil, &Error{Code: "panic", Message: fmt.Sprint(p)}
		}
	}()
	return s.cfg.Handler(ctx, req)
}

// errorParts returns the code and message a handler error travels as.
func errorParts(err error) (code, msg string) {
	var e *Error
	if errors.As(err, &e) {
		code, msg = e.Code, e.Message
	} else {
		code, msg = "error", err.Error()
	}
	if code == "" {
		code = "error"
	}
	if len(code) > 255 {
		code = code[:255]
	}
	return code, msg
}

// replyPlainError answers a plain REQ client's request with an error: the
// two frames "error:CODE" and the message.
func (s *Server) replyPlainError(env [][]byte, code, msg string) {
	s.send(env, nil, [][]byte{[]byte("error:" + code), []byte(msg)})
}

// replyBuf holds a reply's frames (up to an envelope of two: a routing
// id and the delimiter, the header and one frame) and its header, so that
// a reply costs one allocation, or none from an arena.
type replyBuf struct {
	frames [4][]byte
	hdr    [repHeaderLen]byte
}

// sendReply queues the reply to request id: env, the header with st,
// then frames (copied: the slice is not kept).
func (s *Server) sendReply(env [][]byte, id uint64, st Status, frames ...[]byte) {
	s.sendReplyIn(nil, env, id, st, frames...)
}

// sendReplyIn is sendReply with the reply's buffer from a.
func (s *Server) sendReplyIn(a *arena, env [][]byte, id uint64, st Status, frames ...[]byte) {
	rb := a.replyBuf()
	out := rb.frames[:0]
	if n := len(env) + 1 + len(frames); n > len(rb.frames) {
		out = make([][]byte, 0, n)
	}
	out = append(out, env...)
	out = append(out, appendReply(rb.hdr[:0], id, st))
	out = append(out, frames...)
	s.queue(out)
}

// send queues a reply: env, then hdr (if not nil), then frames.
func (s *Server) send(env [][]byte, hdr []byte, frames [][]byte) {
	out := make([][]byte, 0, len(env)+1+len(frames))
	out = append(out, env...)
	if hdr != nil {
		out = append(out, hdr)
	}
	out = append(out, frames...)
	s.queue(out)
}

// queue hands a reply's frames to the socket.
func (s *Server) queue(out [][]byte) {
	// ROUTER drops a reply for a peer that is gone or full rather than
	// block; the client's attempt timeout covers it.
	if err := s.sock.Send(s.ctx, socket.Msg{Frames: out}); err != nil {
		s.sendsFailed.Add(1)
		if !errors.Is(err, socket.ErrClosed) && s.ctx.Err() == nil {
			s.log.Warn("rpc reply not sent", "err", err)
		}
	}
}

// Shutdown drains the server as http.Server.Shutdown does: it withdraws
// the advertisement (when Config.Discovery is set), answers new requests
// with StatusUnavailable (so clients retry elsewhere at once) for at least
// Config.DrainGrace, waits for every accepted request to be answered, then
// closes the socket, letting it flush the replies. When ctx ends first it
// closes at once (as Close) and returns ctx's error. Later calls return
// ErrClosed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		return ErrClosed
	}
	s.draining = true
	s.mu.Unlock()
	var errs []error
	if s.cfg.Discovery != nil {
		if err := s.cfg.Discovery.Withdraw(s.cfg.Service); err != nil && !errors.Is(err, discovery.ErrClosed) {
			errs = append(errs, fmt.Errorf("rpc: withdraw %q: %w", s.cfg.Service, err))
		}
	}
	s.log.Info("rpc server draining")
	grace := time.NewTimer(s.cfg.DrainGrace)
	defer grace.Stop()
	select {
	case <-grace.C:
	case <-ctx.Done():
		return errors.Join(append(errs, s.close(context.Background()), ctx.Err())...)
	}
	for {
		s.mu.Lock()
		n := s.nIn
		s.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-s.idle:
		case <-ctx.Done():
			return errors.Join(append(errs, s.close(context.Background()), ctx.Err())...)
		}
	}
	return errors.Join(append(errs, s.close(ctx))...)
}

// Close stops the server at once: it stops receiving, cancels running
// handlers' contexts, drops their replies and closes the socket. It does
// not withdraw the advertisement. It returns after every goroutine has
// exited and is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	return s.close(context.Background())
}

// close cancels, closes the socket (lingering up to ctx), waits for the
// goroutines and drops what was still queued.
func (s *Server) close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	// Stop receiving and working first, then flush the replies queued.
	s.cancel()
	s.wg.Wait()
	for {
		select {
		case <-s.jobs:
			s.mu.Lock()
			s.nIn--
			s.mu.Unlock()
			s.signalIdle()
			continue
		default:
		}
		break
	}
	err := s.sock.Shutdown(ctx)
	if errors.Is(err, socket.ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = nil
	}
	s.log.Info("rpc server closed")
	return err
}
