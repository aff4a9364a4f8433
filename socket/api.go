package socket

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// Errors returned by Socket methods. Match them with errors.Is.
var (
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("socket: closed")
	// ErrTimeout is returned when a Send or Recv deadline passes, whether
	// it came from the caller's context or from Config.SendTimeout /
	// RecvTimeout. Such errors also match context.DeadlineExceeded.
	ErrTimeout = errors.New("socket: timeout")
	// ErrUnknownPeer is returned by a ROUTER with RouterMandatory set when
	// the destination identity is not connected.
	ErrUnknownPeer = errors.New("socket: unknown peer")
	// ErrIdentityInUse is the reason a ROUTER refuses a connection whose
	// identity another connection holds (see Config.RouterHandover), or
	// one that claims an identity reserved for generated ones.
	ErrIdentityInUse = errors.New("socket: identity in use or reserved")
	// ErrMsgTooLarge reports a message over Config.MaxMsgSize; the peer
	// that sent it is disconnected.
	ErrMsgTooLarge = errors.New("socket: message too large")
	// ErrState is returned when REQ/REP calls come in the wrong order
	// (REQ: Send, Recv, Send...; REP: Recv, Send, Recv...).
	ErrState = errors.New("socket: operation not valid in current state")
	// ErrNotSupported is returned for operations the kind does not support
	// (Recv on PUSH, Subscribe on PULL, ...).
	ErrNotSupported = errors.New("socket: not supported")
	// ErrBadEndpoint is returned for a malformed or unusable endpoint.
	ErrBadEndpoint = errors.New("socket: bad endpoint")
)

// timeoutError matches both ErrTimeout and context.DeadlineExceeded.
type timeoutError struct{ cause error }

func (e timeoutError) Error() string { return "socket: timeout" }
func (e timeoutError) Is(target error) bool {
	return target == ErrTimeout || target == e.cause
}
func (e timeoutError) Unwrap() error { return e.cause }
func (e timeoutError) Timeout() bool { return true }

// Config configures a Socket. The zero value is usable: NULL security,
// default limits, no heartbeats.
type Config struct {
	// Identity is the routing identity a ROUTER peer sees for this socket
	// (ZMQ_ROUTING_ID), at most 255 bytes, not starting with a zero byte.
	// Empty means the peer generates one.
	Identity []byte
	// SendHWM and RecvHWM bound each peer's outgoing and incoming queues,
	// in messages; 0 means 1000.
	SendHWM, RecvHWM int
	// MaxMsgSize is the maximum total size of one incoming message; a peer
	// that sends more is disconnected. 0 means 64 MiB, <0 unlimited. With
	// a limit, a message may also have at most 1024 + MaxMsgSize/32
	// frames, and a command (such as a subscription) may be as large as
	// the limit or 64 KiB, whichever is larger.
	MaxMsgSize int64
	// Linger is how long Close keeps flushing queued outgoing messages.
	// 0 means 1s; <0 means discard queued messages immediately.
	Linger time.Duration
	// SendTimeout and RecvTimeout bound Send and Recv when the context has
	// no deadline; 0 means wait forever.
	SendTimeout, RecvTimeout time.Duration
	// HandshakeTimeout bounds the ZMTP handshake of each connection;
	// 0 means 5s.
	HandshakeTimeout time.Duration
	// HeartbeatInterval is how often a PING is sent to each peer
	// (ZMQ_HEARTBEAT_IVL); 0 disables heartbeats.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout is how long to wait for traffic after a PING before
	// the peer is declared dead (ZMQ_HEARTBEAT_TIMEOUT): a peer silent for
	// HeartbeatInterval + HeartbeatTimeout is disconnected. 0 means
	// HeartbeatInterval.
	HeartbeatTimeout time.Duration
	// HeartbeatTTL is sent in PINGs to tell the peer how long to wait for
	// our traffic (ZMQ_HEARTBEAT_TTL), in units of 100ms; 0 means none.
	HeartbeatTTL time.Duration
	// ReconnectInterval is the first delay before redialing a Connect()ed
	// endpoint (0 = 100ms); it doubles, with jitter, up to
	// ReconnectIntervalMax (0 = 30s).
	ReconnectInterval, ReconnectIntervalMax time.Duration
	// PlainUsername and PlainPassword make this socket a PLAIN client.
	PlainUsername, PlainPassword string
	// PlainAuth makes this socket a PLAIN server: it rejects every peer
	// whose credentials fail the check (and every NULL peer). It is
	// called from connection goroutines, possibly concurrently.
	PlainAuth func(username, password string) bool
	// PubNoDrop makes a PUB or XPUB wait instead of dropping
	// (ZMQ_XPUB_NODROP): Send blocks until every subscriber the message
	// matches has room for it, then queues it for all of them at once, or
	// gives up on all of them when ctx ends or SendTimeout passes. One slow
	// subscriber then slows the publisher down.
	PubNoDrop bool
	// RouterMandatory makes a ROUTER's Send to an unknown identity return
	// ErrUnknownPeer and block when that peer's queue is full; otherwise
	// such messages are dropped and counted in Stats.Dropped.
	RouterMandatory bool
	// RouterHandover lets a new connection whose identity is already in use
	// on a ROUTER take it over (ZMQ_ROUTER_HANDOVER); by default, as in
	// libzmq, such a connection is refused and the first keeps it.
	RouterHandover bool
	// ReqRelaxed lets a REQ send a new request without waiting for the
	// reply to the previous one (whose reply is then discarded).
	ReqRelaxed bool
	// ReqCorrelate makes a REQ prefix each request with a request id and
	// discard replies that do not carry the current one.
	ReqCorrelate bool
	// Logger receives lifecycle logs; nil discards them.
	Logger *slog.Logger
}

// checkKind refuses options that only another kind of socket uses, as
// libzmq refuses them with EINVAL, rather than ignore them silently.
func (c Config) checkKind(k Kind) error {
	for _, o := range []struct {
		set   bool
		name  string
		kinds []Kind
	}{
		{c.PubNoDrop, "PubNoDrop", []Kind{Pub, XPub}},
		{c.RouterMandatory, "RouterMandatory", []Kind{Router}},
		{c.RouterHandover, "RouterHandover", []Kind{Router}},
		{c.ReqRelaxed, "ReqRelaxed", []Kind{Req}},
		{c.ReqCorrelate, "ReqCorrelate", []Kind{Req}},
	} {
		if o.set && !slices.Contains(o.kinds, k) {
			return fmt.Errorf("%w: Config.%s applies to %v sockets, not %s", ErrNotSupported, o.name, o.kinds, k)
		}
	}
	return nil
}

func (c Config) normalized() (Config, error) {
	if c.SendHWM < 0 || c.RecvHWM < 0 {
		return c, fmt.Errorf("socket: negative high-water mark")
	}
	if c.SendHWM == 0 {
		c.SendHWM = 1000
	}
	if c.RecvHWM == 0 {
		c.RecvHWM = 1000
	}
	if c.MaxMsgSize == 0 {
		c.MaxMsgSize = 64 << 20
	}
	if c.Linger == 0 {
		c.Linger = time.Second
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 5 * time.Second
	}
	if c.HeartbeatInterval < 0 || c.HeartbeatTimeout < 0 || c.HeartbeatTTL < 0 {
		return c, fmt.Errorf("socket: negative heartbeat setting")
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = c.HeartbeatInterval
	}
	if c.HeartbeatTTL > 6553*time.Second {
		return c, fmt.Errorf("socket: heartbeat ttl over 6553s")
	}
	if c.ReconnectInterval <= 0 {
		c.ReconnectInterval = 100 * time.Millisecond
	}
	if c.ReconnectIntervalMax <= 0 {
		c.ReconnectIntervalMax = 30 * time.Second
	}
	if c.ReconnectIntervalMax < c.ReconnectInterval {
		c.ReconnectIntervalMax = c.ReconnectInterval
	}
	if len(c.Identity) > 255 {
		return c, fmt.Errorf("socket: identity longer than 255 bytes")
	}
	if len(c.Identity) > 0 && c.Identity[0] == 0 {
		return c, fmt.Errorf("socket: identity starting with a zero byte is reserved")
	}
	if len(c.PlainUsername) > 255 || len(c.PlainPassword) > 255 {
		return c, fmt.Errorf("socket: PLAIN username or password longer than 255 bytes")
	}
	if c.PlainAuth != nil && (c.PlainUsername != "" || c.PlainPassword != "") {
		return c, fmt.Errorf("socket: a socket is either a PLAIN server or a PLAIN client")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Identity = append([]byte(nil), c.Identity...)
	return c, nil
}

// Msg is one (possibly multipart) message. A Msg passed to Send belongs to
// the socket afterwards: do not modify its frames. A Msg returned by Recv
// belongs to the caller; to save allocations, the frames of successive
// received messages may share backing arrays, but each frame is capped at
// its own length and the socket never writes to or reuses them, so the
// caller may modify, append to and keep them freely.
type Msg struct {
	Frames [][]byte
}

// NewMsg returns a message with the given frames (not copied).
func NewMsg(frames ...[]byte) Msg { return Msg{Frames: frames} }

// NewMsgString returns a message whose frames are the given strings.
func NewMsgString(frames ...string) Msg {
	m := Msg{Frames: make([][]byte, len(frames))}
	for i, f := range frames {
		m.Frames[i] = []byte(f)
	}
	return m
}

// String renders the frames for debugging.
func (m Msg) String() string { return fmt.Sprintf("%q", m.Frames) }

// EventType says what an Event reports.
type EventType int

// Event types.
const (
	EventConnected       EventType = iota // handshake done on a connection we dialed
	EventAccepted                         // handshake done on a connection we accepted
	EventDisconnected                     // an established connection ended (Err says why)
	EventHandshakeFailed                  // a connection failed its handshake (Err says why)
	EventDropped                          // messages dropped for a slow peer (rate limited)
	EventListening                        // Bind succeeded
	EventConnectRetried                   // a dial failed; will retry after backoff
)

// String returns the event name, e.g. "connected".
func (t EventType) String() string {
	switch t {
	case EventConnected:
		return "connected"
	case EventAccepted:
		return "accepted"
	case EventDisconnected:
		return "disconnected"
	case EventHandshakeFailed:
		return "handshake-failed"
	case EventDropped:
		return "dropped"
	case EventListening:
		return "listening"
	case EventConnectRetried:
		return "connect-retried"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is a notable thing that happened to a socket.
type Event struct {
	Type     EventType
	Endpoint string // the endpoint bound or connected
	Peer     string // remote address, when known
	Err      error
}

// String renders e for logs.
func (e Event) String() string {
	s := e.Type.String() + " " + e.Endpoint
	if e.Peer != "" {
		s += " peer=" + e.Peer
	}
	if e.Err != nil {
		s += " err=" + e.Err.Error()
	}
	return s
}

// Stats are cumulative counters of a socket.
type Stats struct {
	Sent, Received    uint64 // messages handed to / taken from the socket
	Dropped           uint64 // messages dropped by HWM policy or unroutable
	EventsDropped     uint64 // events lost because Events() was not drained
	Peers             int    // currently connected peers (handshake done)
	HandshakeFailures uint64
	Disconnects       uint64 // established connections that ended
	ConnectRetries    uint64
	TooLarge          uint64 // peers disconnected for exceeding MaxMsgSize
}
