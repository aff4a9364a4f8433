package socket

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"
)

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
	// SendHWMBytes and RecvHWMBytes bound each peer's outgoing and
	// incoming queues in bytes, next to SendHWM and RecvHWM: a queue is
	// full when either bound is reached. A message counts the sizes of
	// its frames plus FrameOverhead bytes per frame. A message bigger
	// than the bound still passes alone (into an empty queue), so
	// messages up to MaxMsgSize always get through. 0 means 16 MiB, <0
	// unlimited. A full queue is handled as when SendHWM or RecvHWM is
	// reached (see Send and the package doc).
	SendHWMBytes, RecvHWMBytes int64
	// SendHWMBytesTotal bounds the bytes queued for all peers together
	// on the kinds whose Send drops for a full peer (PUB and XPUB without
	// PubNoDrop, XSUB, ROUTER without RouterMandatory): a message that
	// would take the total past it is dropped for that peer (counted in
	// Stats.Dropped), unless the peer's queue is empty, so each peer
	// still gets one message at a time. 0 means no bound beyond each
	// peer's; it must not be negative.
	SendHWMBytesTotal int64
	// MaxMsgFrames is the maximum number of frames in one incoming
	// message; a peer that sends more is disconnected (Stats.TooLarge).
	// 0 means 1024, <0 unlimited (then only MaxMsgSize bounds them, and
	// empty frames cost memory it does not see).
	MaxMsgFrames int
	// MaxConns bounds the accepted connections (in their handshake or
	// established) of all the socket's listeners together; one more is
	// closed at once and reported as EventHandshakeFailed. 0 means no
	// bound; it must not be negative.
	MaxConns int
	// MaxConnsPerSource bounds them per TCP source address in the same
	// way (a new connection past it evicts the oldest handshake from
	// that address, or is closed). 0 means no bound; it must not be
	// negative.
	MaxConnsPerSource int
	// MaxMsgSize is the maximum total size of one incoming message; a peer
	// that sends more is disconnected. 0 means 64 MiB, <0 unlimited. A
	// command (such as a subscription) may be as large as the limit or
	// 64 KiB, whichever is larger.
	MaxMsgSize int64
	// Linger is how long Close and Shutdown keep flushing queued outgoing
	// messages (Shutdown stops sooner if its ctx ends). 0 means 1s; <0
	// means discard queued messages immediately.
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
	// CurveServer makes this socket a CURVE server (RFC 26, as libzmq's
	// ZMQ_CURVE_SERVER) with the long-term secret key CurveSecretKey.
	// Without an Authenticator it refuses every client (libzmq without a
	// ZAP handler accepts any key: the trap this avoids), unless
	// CurveAllowAnyClient says that any client key may connect.
	CurveServer bool
	// CurveAllowAnyClient lets a CURVE server without an Authenticator
	// accept any client key: traffic is encrypted, but clients are not
	// authenticated (anyone who knows the server's public key connects).
	CurveAllowAnyClient bool
	// CurveServerKey makes this socket a CURVE client of the server with
	// this public key, with the long-term key pair CurveSecretKey (zero:
	// a fresh one per socket) and CurvePublicKey (zero: derived from it).
	CurveServerKey, CurveSecretKey, CurvePublicKey CurveKey
	// CurveServerKeyFor, when set, gives the CURVE server key of each
	// endpoint this socket connects to (with Connect), for a socket that
	// connects to servers with different keys: it is called with the
	// endpoint before every connection attempt. A key makes that
	// connection a CURVE client of that server with CurveSecretKey
	// (zero: a fresh one per socket); the zero key and no error connect
	// with NULL security; an error is no attempt at all: it is reported
	// as EventConnectRetried with the error (and logged) and asked again
	// after the reconnect backoff. It excludes CurveServer,
	// CurveServerKey and PLAIN, and must be safe for concurrent use.
	CurveServerKeyFor func(endpoint string) (CurveKey, error)
	// Authenticator decides which peers may connect (see Authenticator);
	// nil accepts all that pass their mechanism's own checks.
	Authenticator Authenticator
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
	// SenderWrites makes a DEALER, PUSH or PAIR write its messages from
	// the sending goroutines instead of waking each connection's writer
	// goroutine (as REQ and REP always do when the writer is idle): the
	// Send that finds no write under way yields once, so that the
	// goroutines ready to run queue their messages too, then writes all
	// that is queued in one write; Sends that come meanwhile only queue.
	// Send still never waits for the network (what the connection does
	// not take at once goes to the writer goroutine), and ordering,
	// SendHWM and Close behave as without it. It suits senders that each
	// wait for an answer (an RPC client): a hand-off fewer per batch. A
	// goroutine streaming messages should leave it off, as its every
	// Send would then make a write.
	SenderWrites bool
	// Logger receives lifecycle logs; nil discards them.
	Logger *slog.Logger
}

// Defaults of the Config fields that bound a peer's memory.
const (
	// DefaultHWMBytes is the default of SendHWMBytes and RecvHWMBytes.
	DefaultHWMBytes = 16 << 20
	// DefaultMaxMsgFrames is the default of MaxMsgFrames.
	DefaultMaxMsgFrames = 1024
	// FrameOverhead is what a frame counts in the byte bounds beyond its
	// body: the memory that keeps track of it.
	FrameOverhead = 32
)

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
		{c.SenderWrites, "SenderWrites", []Kind{Dealer, Push, Pair}},
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
	if c.SendHWMBytes == 0 {
		c.SendHWMBytes = DefaultHWMBytes
	}
	if c.RecvHWMBytes == 0 {
		c.RecvHWMBytes = DefaultHWMBytes
	}
	if c.SendHWMBytes < 0 {
		c.SendHWMBytes = math.MaxInt64
	}
	if c.RecvHWMBytes < 0 {
		c.RecvHWMBytes = math.MaxInt64
	}
	if c.SendHWMBytesTotal < 0 || c.MaxConns < 0 || c.MaxConnsPerSource < 0 {
		return c, fmt.Errorf("socket: negative SendHWMBytesTotal, MaxConns or MaxConnsPerSource")
	}
	if c.MaxMsgFrames == 0 {
		c.MaxMsgFrames = DefaultMaxMsgFrames
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
	if err := c.checkCurve(); err != nil {
		return c, err
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Identity = append([]byte(nil), c.Identity...)
	return c, nil
}
