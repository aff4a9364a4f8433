package rpc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/internal/localipc"
	"github.com/fastmq/fastmq/socket"
)

// Watcher reports the instances of a service as they come and go.
// *discovery.Membership and discoverytest's *Node implement it.
type Watcher interface {
	Watch(ctx context.Context, service string) (<-chan discovery.Event, error)
}

// ClientConfig configures a Client. Service and Discovery are required.
type ClientConfig struct {
	// Service to call.
	Service string
	// Discovery reports the service's instances.
	Discovery Watcher
	// AttemptTimeout bounds each attempt of a call that may be retried
	// (one with an idempotency key) before it is retried on another
	// instance. Default: a third of the time the call has left when it
	// starts, or 5 s for a call without a deadline. CallOptions override it.
	AttemptTimeout time.Duration
	// Retries is how many times a call is retried after its first attempt.
	// Default 3; negative means never. CallOptions override it.
	Retries int
	// BackoffBase and BackoffMax bound the pause before a retry: random in
	// [0, min(BackoffMax, BackoffBase × 2^retry)]. Default 5 ms and 100 ms.
	BackoffBase, BackoffMax time.Duration
	// EjectAfter is how many consecutive failed attempts (timeouts, lost
	// connections) eject an instance. Default 3.
	EjectAfter int
	// ProbeAfter is how long an ejected instance gets no traffic; then one
	// call at a time probes it (half-open) until one succeeds. Default 1 s.
	ProbeAfter time.Duration
	// LatencyDecay is the half-life of an instance's latency estimate
	// while it gets no replies. Calls go to the faster of two instances
	// picked at random; an instance measured slow once would otherwise
	// never be measured again. Default 100 ms; negative: no decay.
	LatencyDecay time.Duration
	// ID identifies this client to servers' reply caches; at most
	// MaxClientID bytes. Default: 16 random bytes.
	ID []byte
	// Socket configures the DEALER sockets (one per instance). A zero
	// Linger means -1 here: a request queued for an instance that goes
	// away is retried elsewhere, not flushed.
	Socket socket.Config
	// NoLocalIPC keeps the client on tcp. By default it reaches an
	// instance on its own host over the unix socket twin of the
	// instance's tcp endpoint, when the twin is in LocalIPCDir (see
	// ServerConfig.NoLocalIPC): one connection, over the twin alone. A
	// twin it cannot connect to, or whose handshake fails, is dropped for
	// the tcp endpoints, with no request lost. Not with an Authenticator
	// in Socket (an address rule refuses unix peers).
	NoLocalIPC bool
	// LocalIPCDir is where the client looks for twins; it must be the
	// servers' ServerConfig.LocalIPCDir, and private (owned by this user,
	// writable by nobody else), or the client uses tcp. Default:
	// fastmq-<uid> in os.TempDir().
	LocalIPCDir string
	// Logger receives the client's logs; nil discards them.
	Logger *slog.Logger
}

// CallOptions tune one call. The zero value is a call without an
// idempotency key, with the client's defaults.
type CallOptions struct {
	// Timeout bounds the call when ctx has no earlier deadline; 0: none.
	Timeout time.Duration
	// IdempotencyKey, if set, lets the call be retried after a timeout or
	// a lost instance: servers run the handler once per (client, key)
	// within their cache window and answer retries from the cache. At most
	// MaxKey bytes.
	IdempotencyKey string
	// Idempotent gives the call a random IdempotencyKey when it has none:
	// say so when running the handler twice on different instances is safe.
	Idempotent bool
	// AttemptTimeout overrides ClientConfig.AttemptTimeout.
	AttemptTimeout time.Duration
	// Retries overrides ClientConfig.Retries when not 0; negative: never.
	Retries int
	// WaitForInstance makes a call with no instance wait for one (until
	// ctx ends) instead of failing with ErrNoInstance.
	WaitForInstance bool
}

// Client calls the instances of a service with retries and failover.
//
// A Client is safe for concurrent use; Call blocks until the reply, an
// error or the end of ctx. It keeps one DEALER socket connected to each
// instance and picks an instance per attempt by least outstanding attempts
// (two random choices), then gossip RTT, then measured latency. Close is
// idempotent and returns after every goroutine has exited.
type Client struct {
	cfg ClientConfig
	log *slog.Logger

	cancel context.CancelFunc
	wg     sync.WaitGroup // watch (which waits for the instances' goroutines)
	nextID atomic.Uint64

	// pmu guards pending, the calls waiting for replies by request id; it
	// is taken after mu when both are held.
	pmu     sync.Mutex
	pending map[uint64]*pendingCall

	mu          sync.Mutex // guards the fields below; never held across I/O
	insts       map[string]*instance
	retiring    map[*instance]struct{} // withdrawn or left, still answering outstanding attempts
	failedAt    map[string]time.Time   // nodes gossip declared failed, for half-open on return
	localFailed map[string]struct{}    // twins that failed, not tried again
	changed     chan struct{}          // closed and replaced when the instance set changes
	departed    []departed             // instances gone lately, oldest first (Instances)
	cands       []*instance            // pick's scratch
	closed      bool
	watchEnded  bool
	ejections   uint64

	calls, errs, retries, timeouts, failures atomic.Uint64
	latency                                  histogramAtomic
}

// pendingCall is a call waiting for a reply, by request id. They are
// pooled: replies is handed one reply at most, under the Client's mu
// while the call is in pending, and emptied before reuse.
type pendingCall struct {
	replies chan reply
	// lost is signalled, under the Client's mu, when the connection of
	// inst drops or inst goes while an attempt on it is in progress: a
	// channel of the call's own, so that calls do not all wait on one
	// channel of the instance's.
	lost chan struct{}
	inst *instance // the instance of the attempt in progress; guarded by the Client's mu

	// msg is the first attempt's request message. The socket owns it once
	// sent, until written; a reply to it means the server read it, so a
	// call whose one attempt was answered leaves it free for the next
	// call. Any other call does not go back to the pool.
	msg      reqMsg
	sends    int  // attempts that handed a request to a socket
	answered bool // the reply came from the instance of the only attempt

	end time.Time // when the reply came, if the attempt it answered knew
}

// reqMsg is a request message's frames and header in one block.
type reqMsg struct {
	frames [3][]byte // the empty delimiter, the header, the request
	hdr    [reqHeaderMin + MaxClientID + 8]byte
}

var pendingPool = sync.Pool{New: func() any {
	return &pendingCall{replies: make(chan reply, 1), lost: make(chan struct{}, 1)}
}}

// loseLocked tells the calls with an attempt in progress on inst that its
// connection is lost.
func (c *Client) loseLocked(inst *instance) {
	if inst.outstanding == 0 {
		return
	}
	c.pmu.Lock()
	defer c.pmu.Unlock()
	for _, p := range c.pending {
		if p.inst == inst {
			p.inst = nil
			select {
			case p.lost <- struct{}{}:
			default:
			}
		}
	}
}

// reply is one reply a recvLoop handed to its call.
type reply struct {
	from   *instance
	status Status
	frames [][]byte
}

// NewClient starts following the service's instances.
func NewClient(cfg ClientConfig) (*Client, error) {
	switch {
	case cfg.Service == "":
		return nil, errors.New("rpc: ClientConfig.Service is required")
	case cfg.Discovery == nil:
		return nil, errors.New("rpc: ClientConfig.Discovery is required")
	case len(cfg.ID) > MaxClientID:
		return nil, fmt.Errorf("rpc: ClientConfig.ID longer than %d bytes", MaxClientID)
	case cfg.AttemptTimeout < 0, cfg.BackoffBase < 0, cfg.BackoffMax < 0, cfg.EjectAfter < 0, cfg.ProbeAfter < 0:
		return nil, errors.New("rpc: negative ClientConfig value")
	}
	if cfg.Retries == 0 {
		cfg.Retries = 3
	}
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase = 5 * time.Millisecond
	}
	if cfg.BackoffMax == 0 {
		cfg.BackoffMax = 100 * time.Millisecond
	}
	if cfg.EjectAfter == 0 {
		cfg.EjectAfter = 3
	}
	if cfg.ProbeAfter == 0 {
		cfg.ProbeAfter = time.Second
	}
	if cfg.LatencyDecay == 0 {
		cfg.LatencyDecay = 100 * time.Millisecond
	}
	if len(cfg.ID) == 0 {
		cfg.ID = make([]byte, 16)
		rand.Read(cfg.ID)
	} else {
		cfg.ID = append([]byte(nil), cfg.ID...)
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if cfg.LocalIPCDir == "" {
		cfg.LocalIPCDir = localipc.DefaultDir()
	}
	c := &Client{
		cfg:         cfg,
		log:         lg.With("component", "rpc-client", "service", cfg.Service),
		insts:       make(map[string]*instance),
		retiring:    make(map[*instance]struct{}),
		failedAt:    make(map[string]time.Time),
		localFailed: make(map[string]struct{}),
		pending:     make(map[uint64]*pendingCall),
		changed:     make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	events, err := cfg.Discovery.Watch(ctx, cfg.Service)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("rpc: watch %q: %w", cfg.Service, err)
	}
	c.cancel = cancel
	c.wg.Add(1)
	go c.watch(ctx, events)
	return c, nil
}

// notifyLocked wakes calls waiting for an instance.
func (c *Client) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Call sends req to an instance of the service and returns its reply,
// retrying on other instances as CallOptions allow. A call with an
// idempotency key is retried after an attempt timeout or a lost
// connection; any call is retried on another instance when the server
// says it did not run the handler (shutting down, overloaded) or the
// request could not be queued. The returned error wraps ErrNoInstance,
// ErrOutcomeUnknown, ErrRetriesExhausted, ctx's error or ErrClosed, or is
// an *Error from the handler. The reply belongs to the caller. req is not
// modified or kept.
func (c *Client) Call(ctx context.Context, req []byte, opts CallOptions) ([]byte, error) {
	if len(opts.IdempotencyKey) > MaxKey {
		return nil, fmt.Errorf("rpc: idempotency key longer than %d bytes", MaxKey)
	}
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	start := time.Now()
	c.calls.Add(1)
	b, end, err := c.call(ctx, req, opts, start)
	if err != nil {
		c.errs.Add(1)
		if ctx.Err() != nil {
			c.timeouts.Add(1)
			err = fmt.Errorf("%w, after %v", err, time.Since(start).Round(time.Millisecond))
		}
		return nil, err
	}
	if end.IsZero() {
		end = time.Now()
	}
	c.latency.observe(end.Sub(start))
	return b, nil
}

// call makes the call. end is when its reply came, when the attempt that
// got it knew (zero otherwise).
func (c *Client) call(ctx context.Context, req []byte, opts CallOptions, start time.Time) (b []byte, end time.Time, err error) {
	key := opts.IdempotencyKey
	if key == "" && opts.Idempotent {
		var k [12]byte
		rand.Read(k[:])
		key = hex.EncodeToString(k[:])
	}
	retries := c.cfg.Retries
	if opts.Retries != 0 {
		retries = opts.Retries
	}
	retries = max(retries, 0)
	attemptTimeout := opts.AttemptTimeout
	if attemptTimeout == 0 {
		attemptTimeout = c.cfg.AttemptTimeout
	}
	if attemptTimeout == 0 {
		attemptTimeout = 5 * time.Second
		if d, ok := ctx.Deadline(); ok {
			attemptTimeout = max(d.Sub(start)/3, time.Millisecond)
		}
	}
	id := c.nextID.Add(1)
	p := pendingPool.Get().(*pendingCall)
	c.pmu.Lock()
	c.pending[id] = p
	c.pmu.Unlock()
	defer func() {
		// Every attempt has ended (and cleared p.inst): once out of
		// pending, p gets nothing more.
		c.pmu.Lock()
		delete(c.pending, id)
		c.pmu.Unlock()
		// No reply can come now: empty the channels for the next call.
		select {
		case <-p.replies:
		default:
		}
		select {
		case <-p.lost:
		default:
		}
		if p.sends == 1 && p.answered {
			p.msg.frames = [3][]byte{} // keep no caller's request
			p.sends, p.answered, p.end = 0, false, time.Time{}
			pendingPool.Put(p)
		}
	}()

	hr := request{id: id, clientID: c.cfg.ID}
	if key != "" {
		hr.key = []byte(key)
	}
	var triedBuf [4]*instance
	tried := triedBuf[:0]
	var lastErr error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if attempt > retries {
				return nil, time.Time{}, fmt.Errorf("rpc: call %q: %w after %d attempts: %w", c.cfg.Service, ErrRetriesExhausted, attempt, lastErr)
			}
			c.retries.Add(1)
			// Back off, but take a late reply to an earlier attempt.
			d := min(c.cfg.BackoffMax, c.cfg.BackoffBase<<min(attempt-1, 20))
			t := time.NewTimer(mrand.N(d + 1))
			select {
			case r := <-p.replies:
				t.Stop()
				c.lateReply(r)
				if b, err, done := c.result(r); done {
					return b, time.Time{}, err
				}
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, time.Time{}, c.ctxErr(ctx, lastErr)
			}
		}
		pk, err := c.pick(ctx, tried, opts.WaitForInstance, p)
		if err != nil {
			if lastErr != nil && errors.Is(err, ErrNoInstance) {
				return nil, time.Time{}, fmt.Errorf("rpc: call %q: %w (after: %w)", c.cfg.Service, ErrNoInstance, lastErr)
			}
			return nil, time.Time{}, err
		}
		if pk.restart {
			tried = tried[:0]
		}
		tried = append(tried, pk.inst)
		sent := start // the first attempt follows at once
		if attempt > 0 {
			sent = time.Now()
		}
		b, err, done := c.attempt(ctx, pk, p, hr, req, key != "", attemptTimeout, sent)
		if done {
			return b, p.end, err
		}
		lastErr = err
	}
}

// ctxErr wraps ctx's error with the call's service and last failure.
func (c *Client) ctxErr(ctx context.Context, last error) error {
	if last != nil {
		return fmt.Errorf("rpc: call %q: %w (last attempt: %w)", c.cfg.Service, ctxEnd(ctx), last)
	}
	return fmt.Errorf("rpc: call %q: %w", c.cfg.Service, ctxEnd(ctx))
}

// ctxEnd is why ctx ended. The clock can pass a context's deadline a
// moment before its timer fires and Err reports it: a call that saw the
// deadline pass then ends with context.DeadlineExceeded all the same.
func ctxEnd(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

// WaitForInstances blocks until at least n instances are known, or ctx
// ends.
func (c *Client) WaitForInstances(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		have, ch, closed := len(c.insts), c.changed, c.closed || c.watchEnded
		c.mu.Unlock()
		if have >= n {
			return nil
		}
		if closed {
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("rpc: wait for %d instances of %q (have %d): %w", n, c.cfg.Service, have, ctx.Err())
		}
	}
}

// Instances returns the client's view of each instance that gets calls,
// sorted by node. The caller owns the slice.
func (c *Client) Instances() []InstanceStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.instancesLocked(false)
}

// instancesLocked returns Instances; with all, also the instances
// draining (withdrawn or left, answering what they have) with State
// "draining", and those gone in the last departedFor (at most
// maxDeparted) with State "gone" and their counts as they left.
func (c *Client) instancesLocked(all bool) []InstanceStats {
	out := make([]InstanceStats, 0, len(c.insts))
	seen := make(map[string]bool, len(c.insts))
	for _, inst := range c.insts {
		s := inst.st
		s.Outstanding, s.State = inst.outstanding, inst.state.String()
		out = append(out, s)
		seen[s.Node] = true
	}
	if all {
		for inst := range c.retiring {
			s := inst.st
			s.Outstanding, s.State = inst.outstanding, "draining"
			out = append(out, s)
			seen[s.Node] = true
		}
		c.pruneDepartedLocked(time.Now())
		for _, d := range c.departed {
			if !seen[d.Node] {
				out = append(out, d.InstanceStats)
				seen[d.Node] = true
			}
		}
	}
	for i := range out {
		out[i].Endpoints = slices.Clone(out[i].Endpoints) // the caller's
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// How long, and how many, instances that are gone stay in Stats.
const (
	departedFor = 10 * time.Minute
	maxDeparted = 16
)

// departed is an instance gone, as it was when it went.
type departed struct {
	InstanceStats
	at time.Time
}

// pruneDepartedLocked drops the departed instances gone for longer than
// departedFor, or beyond the maxDeparted latest.
func (c *Client) pruneDepartedLocked(now time.Time) {
	keep := c.departed[:0]
	for _, d := range c.departed {
		if now.Sub(d.at) < departedFor {
			keep = append(keep, d)
		}
	}
	if len(keep) > maxDeparted {
		// To the front of the array: the tail cleared below is then
		// none of keep's.
		keep = append(keep[:0], keep[len(keep)-maxDeparted:]...)
	}
	clear(c.departed[len(keep):])
	c.departed = keep
}

// ClientStats are a client's counters since it started.
type ClientStats struct {
	Calls     uint64    `json:"calls"`     // calls made
	Errors    uint64    `json:"errors"`    // calls that returned an error (remote errors included)
	Retries   uint64    `json:"retries"`   // attempts after the first
	Timeouts  uint64    `json:"timeouts"`  // calls that ended with their ctx
	Failures  uint64    `json:"failures"`  // failed attempts: timeouts, lost connections, sends not queued
	Ejections uint64    `json:"ejections"` // instances ejected for consecutive failures
	Latency   Histogram `json:"latency"`
	// Instances: those that get calls, those draining (State "draining"),
	// and those gone in the last 10 minutes (at most 16; State "gone",
	// their counts as they left), so that the failures that made calls
	// fail over stay to be seen.
	Instances []InstanceStats `json:"instances"`
}

// Stats returns the client's counters.
func (c *Client) Stats() ClientStats {
	c.mu.Lock()
	ej := c.ejections
	insts := c.instancesLocked(true)
	c.mu.Unlock()
	return ClientStats{
		Calls: c.calls.Load(), Errors: c.errs.Load(), Retries: c.retries.Load(),
		Timeouts: c.timeouts.Load(), Failures: c.failures.Load(), Ejections: ej,
		Latency: c.latency.snapshot(), Instances: insts,
	}
}

// Close stops following the service and closes every socket. Calls in
// progress return ErrClosed-wrapped or lost-connection errors. It is
// idempotent and returns after every goroutine has exited.
func (c *Client) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.notifyLocked()
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}
