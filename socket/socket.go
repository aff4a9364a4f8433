package socket

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/internal/zmtp"
)

// Where things are: socket.go holds the Socket and New, close.go Close and
// Shutdown, registry.go the peer list, listen.go and connect.go the accept
// and dial loops. peer.go is one connection and its handshake, reader.go
// and writer.go its two goroutines, outqueue.go and inqueue.go its
// queues. send.go dispatches Send by kind to the pattern families, each
// with its rules, state and lock in a file of its own: roundrobin.go,
// pubsub.go (with subctl.go and subs.go for subscriptions), router.go and
// reqrep.go; recv.go is Recv and the fair queue. waiter.go is how blocked
// senders and receivers wait. config.go, errors.go, msg.go, events.go and
// stats.go hold the API's types.

// Socket is a ZeroMQ socket of one Kind, speaking ZMTP 3 over tcp://,
// ipc:// and inproc:// endpoints.
//
// A Socket is safe for concurrent use, but REQ and REP keep a single
// send/receive state, so concurrent Send or Recv calls on them interleave
// unpredictably. Send and Recv block as documented on each; Bind, Connect
// and their inverses do not block on the network; Subscribe and
// Unsubscribe never block. Close and Shutdown may be called more than
// once, and after either every other method returns ErrClosed.
type Socket struct {
	kind  Kind
	cfg   Config
	log   *slog.Logger
	hs    zmtp.Config
	authz func(zmtp.AuthRequest, *PeerProcess) error // the handshake's Authorize, given the peer process (Config.authorizer)

	closed  atomic.Bool
	closing chan struct{} // closed by Close or Shutdown
	// lendIdle is how long a lent reader role must have been free before
	// the reader goroutine takes it back (recvdirect.go): defaultLendIdle;
	// tests that count direct reads set it, before connecting, long
	// enough that a loaded machine's pauses do not count.
	lendIdle time.Duration
	// lingerEnd is when lingering writers give up (close.go): written
	// before closing closes, read only after.
	lingerEnd time.Time

	// mu guards the endpoints and SUB/XSUB's own subscriptions, and is
	// held while a peer is registered (registry.go).
	mu        sync.Mutex
	listeners map[string]*listener      // by resolved endpoint
	dialers   map[string][]*dialer      // by endpoint given to Connect
	pending   map[net.Conn]*pendingConn // connections still handshaking
	// Admission of accepted connections (admit.go), guarded by mu.
	pendingAccepted int                      // accepted connections in pending
	pendingBySrc    map[string]int           // the same by TCP source address
	connsBySrc      map[string]int           // accepted connections alive by TCP source address
	accepted        int                      // accepted connections alive
	authFails       map[string]*authFails    // PLAIN failures by TCP source address
	subs            subTable                 // SUB/XSUB: our subscriptions (changed under mu)
	mySubs          atomic.Pointer[subTable] // SUB: the table the reader filters with (&subs)

	// The peers that finished their handshake, replaced as a whole under
	// peersMu and read without a lock (registry.go).
	peersMu sync.Mutex
	peers   atomic.Pointer[[]*peer]

	// Each pattern family's own state and lock, in the family's file.
	rr     roundRobin  // PUSH, DEALER, PAIR, REQ: sending (roundrobin.go)
	in     fairQueue   // every kind that receives (recv.go)
	pub    pubState    // PUB, XPUB (pubsub.go)
	router routerState // ROUTER (router.go)
	req    reqState    // REQ (reqrep.go)
	rep    repState    // REP (reqrep.go)
	ev     eventQueue  // events.go

	queuedBytes atomic.Int64 // bytes queued for all peers, if SendHWMBytesTotal is set

	st struct {
		sent, received, dropped, eventsDropped, hsFail, disconnects, retries, tooLarge atomic.Uint64
		// Direct writes (direct.go), and those that left a rest to the
		// writer goroutine: for tests and benchmarks, not in Stats.
		direct, directRest atomic.Uint64
		// Writes by a sender or a ROUTER's reader rather than the
		// writer goroutine (peer.writeClaimed), likewise.
		claimedWrites atomic.Uint64
		// Messages a Recv read from the connection itself
		// (recvdirect.go), likewise.
		directRecv atomic.Uint64
		// Kicks of a connection's reads (recvdirect.go), likewise.
		kicks atomic.Uint64
	}

	wg sync.WaitGroup
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
		kind:         kind,
		cfg:          c,
		log:          c.Logger.With("component", "socket", "kind", kind.String()),
		closing:      make(chan struct{}),
		lendIdle:     defaultLendIdle,
		listeners:    make(map[string]*listener),
		dialers:      make(map[string][]*dialer),
		pending:      make(map[net.Conn]*pendingConn),
		pendingBySrc: make(map[string]int),
		connsBySrc:   make(map[string]int),
		authFails:    make(map[string]*authFails),
	}
	s.rr.blocked.init()
	s.in.blocked.init()
	s.in.blocked.more = func() bool { return s.in.queued.Load() > 0 || s.in.leftN.Load() > 0 }
	s.router.init()
	s.ev.init()
	s.hs = zmtp.Config{
		SocketType: kind.String(),
		Identity:   c.Identity,
		Username:   c.PlainUsername,
		Password:   c.PlainPassword,
		Auth:       c.PlainAuth,
		Curve:      c.curveHandshake(),
	}
	s.authz = c.authorizer()
	empty := []*peer{}
	s.peers.Store(&empty)
	s.mySubs.Store(&s.subs)
	return s, nil
}

// Kind returns the socket's kind.
func (s *Socket) Kind() Kind { return s.kind }

// ctxFor applies a default timeout when ctx has none.
func ctxFor(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		if _, ok := ctx.Deadline(); !ok {
			return context.WithTimeout(ctx, d)
		}
	}
	return ctx, func() {}
}
