// Package socket implements ZeroMQ sockets (PAIR, PUB, SUB, REQ, REP,
// DEALER, ROUTER, PULL, PUSH, XPUB, XSUB) speaking ZMTP 3.0/3.1 over
// tcp://, ipc:// and inproc:// endpoints, wire compatible with libzmq,
// pyzmq, CZMQ, JeroMQ and go-zeromq/zmq4 peers.
//
// # Engine
//
// Each connection has one reader and one writer goroutine. The writer
// takes everything queued for its peer (at most Config.SendHWM messages)
// in one batch, encodes it into a buffered stream and flushes only when
// the queue is empty, so bursts cost one system call per batch. Each
// connection's reader reads into blocks it never reuses and hands out
// frame bodies as slices of them, so a received frame is copied once, by
// the kernel. It fills a bounded incoming queue (Config.RecvHWM
// messages); Recv takes from the queues in turn (fair queueing), and a
// reader whose queue is full stops reading its connection, so flow
// control pushes back on that sender only. Frame sizes are checked
// against Config.MaxMsgSize before memory is allocated.
//
// A round trip takes no hand-off between goroutines on REQ, REP, DEALER
// and ROUTER sockets with a single tcp or ipc peer: a REQ or REP sender
// writes to an idle connection itself, and a Recv that finds the receive
// queue empty reads the connection itself while the reader goroutine
// waits (it reads again once no Recv has read for about a millisecond,
// so heartbeats are answered and the receive queue fills meanwhile).
// With two or more peers the readers read, for fair queueing, and with
// two or more Recv calls waiting at once (a server's workers) the reader
// reads for them all, many messages per read; on a ROUTER it then also
// writes the replies they send while it lets them run, rather than wake
// the writer. With Config.SenderWrites, DEALER, PUSH and PAIR senders
// write their messages themselves, batched: the Send that finds no write
// under way yields once, then writes all that is queued.
//
// The ZMTP handshake runs in the connection's own goroutine under
// Config.HandshakeTimeout: a silent or malformed peer costs one goroutine
// until it is dropped and never delays other peers. Failed handshakes are
// reported as EventHandshakeFailed.
//
// # Memory budgets
//
// What one peer can make the socket hold is bounded, and each bound says
// what a peer past it gets:
//
//   - Receive queue: Config.RecvHWM messages and Config.RecvHWMBytes
//     bytes (default 16 MiB; a message counts its frame sizes plus
//     FrameOverhead per frame). A message bigger than the byte bound
//     passes alone. Past either bound the connection's reader stops
//     reading: backpressure on that peer only. The reader also holds at
//     most one message being decoded and one batch waiting for room, so
//     a peer costs at most about RecvHWMBytes plus two messages (each up
//     to Config.MaxMsgSize).
//   - Send queue: Config.SendHWM messages and Config.SendHWMBytes bytes
//     (default 16 MiB), counting what the writer took until it is
//     written. Past either bound Send blocks or drops for that peer, as
//     Send says for each kind (drops are counted in Stats.Dropped and
//     reported by EventDropped). On the kinds that drop,
//     Config.SendHWMBytesTotal can also bound all peers together.
//   - One message: Config.MaxMsgSize bytes and Config.MaxMsgFrames frames
//     (default 1024). A frame's memory is allocated as its bytes arrive
//     (64 KiB first, then at most doubling), never as announced. A peer
//     past either bound is disconnected: EventDisconnected with an error
//     matching ErrMsgTooLarge, counted in Stats.TooLarge.
//   - Subscriptions (PUB, XPUB): at most 4096 distinct prefixes and
//     4 MiB of them (each counts its length plus 64 bytes) per peer; a
//     peer past either is disconnected (EventDisconnected).
//   - Handshakes: an accepted connection must send its greeting within
//     1s (or HandshakeTimeout if shorter) and finish within
//     HandshakeTimeout. At most 32 handshakes per TCP source address and
//     256 in all may be in progress; a new connection past either evicts
//     the oldest handshake of that address, or of all, so silent
//     connections cannot lock good peers out. Config.MaxConns bounds
//     accepted connections, Config.MaxConnsPerSource those of one TCP
//     address; past either a new one evicts the oldest handshake (of
//     that address), or is closed if none is left. A TCP address whose PLAIN
//     credentials failed 10 times within a minute is refused until that
//     minute ends. Connections closed by these rules are reported as
//     EventHandshakeFailed with an error matching ErrRefused.
//
// # Policies
//
// See Send for what each kind does when a peer's queue is full: PUB, XPUB,
// XSUB (and ROUTER, unless Config.RouterMandatory) drop the message for
// that peer; the other kinds block. Messages queued for a peer that
// disconnects are lost: delivery is at most once.
// Connect()ed endpoints are redialed with exponential backoff and jitter
// (Config.ReconnectInterval up to Config.ReconnectIntervalMax); SUB and
// XSUB re-announce their subscriptions on each new connection. A ROUTER
// refuses a second connection with an identity already in use, as libzmq
// does, unless Config.RouterHandover gives the identity to the new
// connection.
//
// A PUB drops messages for a subscriber whose queue is full, so one slow
// subscriber never holds up the others; Config.PubNoDrop
// (ZMQ_XPUB_NODROP) makes Send wait for room instead, losing nothing.
//
// PUB filters at the publisher: it tracks each subscriber's prefixes,
// accepting both ZMTP 3.1 SUBSCRIBE/CANCEL commands and ZMTP 3.0
// \x01/\x00-prefixed messages. As in libzmq, a subscriber holds a prefix
// once however often it subscribes, and one CANCEL removes it; SUB and
// XSUB count their own Subscribe calls and announce only a prefix's first
// Subscribe and last Unsubscribe. SUB sends the form matching the peer's
// greeting, and also filters what it receives. Subscription changes
// (Subscribe, Unsubscribe, and subscription messages sent on an XSUB) do
// not wait in a peer's message queue: each peer has its own list of
// pending changes, merged into a net count per prefix while the peer is
// slow, so they never block, are never dropped and cost a stalled peer
// memory bounded by the number of distinct prefixes.
//
// Heartbeats follow ZMQ_HEARTBEAT_IVL/TIMEOUT/TTL: with
// Config.HeartbeatInterval set, a PING goes to each ZMTP 3.1 peer every
// interval and a peer that sends nothing at all (no PONG, no message)
// within interval + timeout is disconnected; the TTL a peer announces in
// its PINGs is honoured likewise. ZMTP 3.0 peers know no PING and are
// neither pinged nor timed out. PINGs are always answered and never reach
// the application.
//
// # Closing
//
// Close and Shutdown follow http.Server. Both stop listening and dialing at
// once, make blocked Send and Recv calls return ErrClosed and return only
// once every goroutine of the socket has exited. In between, each
// connection lingers: it writes what is queued for it, half-closes and
// waits for the peer to close its side. Close lingers up to
// Config.Linger; Shutdown(ctx) also stops lingering when ctx ends (the
// writes give up at ctx's deadline, and cancelling ctx cuts every
// connection), so a caller with a shutdown deadline is never held past
// it by a peer that stopped reading.
//
// # Security
//
// NULL by default. Config.PlainUsername/PlainPassword make a PLAIN client,
// Config.PlainAuth a PLAIN server that rejects failing credentials with a
// ZMTP ERROR. PLAIN sends passwords in clear text.
package socket
