// Package rpc is reliable request/reply across the discovered instances of
// a service: deadlines that travel, retries with failover, idempotency
// keys with a reply cache, routing by load and RTT, and a graceful drain
// (the ZeroMQ Guide's Lazy Pirate, Freelance and idempotent-service
// patterns, over gossip discovery).
//
// A Server serves a Handler over a ROUTER socket and advertises it as a
// service; a Client follows the service's instances through discovery and
// calls them:
//
//	srv, err := rpc.NewServer(rpc.ServerConfig{Service: "upper", Handler: h, Discovery: members})
//	c, err := rpc.NewClient(rpc.ClientConfig{Service: "upper", Discovery: members})
//	reply, err := c.Call(ctx, []byte("hi"), rpc.CallOptions{Timeout: 2 * time.Second})
//
// A Node does both in one line each: Node.Handle and Node.Call.
//
// # Wire format
//
// Requests and replies are ZeroMQ REQ/REP envelopes: zero or more routing
// frames, an empty delimiter frame, then the body. A FastMQ client's body
// is two frames, a header and the request:
//
//	request header:  "FMQ" 0x01 'Q' flags:u8 id:u64 timeout_ns:u64 idlen:u8 clientid [keylen:u8 key]
//	reply header:    "FMQ" 0x01 'R' status:u8 id:u64
//
// Integers are big-endian. flags bit 0 says a key follows; other bits must
// be zero. id is the call's id, the same for every attempt of a call, so a
// late reply to an earlier attempt completes the call. timeout_ns is what
// is left of the caller's deadline when the attempt is sent (0: none); the
// server turns it into a local deadline on arrival, so no clocks need
// agree. clientid (1–64 bytes) and key (1–255 bytes) key the reply cache.
// A reply's body after its header is one frame, the reply, for StatusOK;
// two frames, a code and a message, for StatusError; nothing for the
// statuses that mean the handler did not run (StatusUnavailable,
// StatusOverloaded, StatusBadRequest). A request whose deadline passes
// before a handler takes it is dropped without a reply.
//
// A body whose first frame does not start with "FMQ" 0x01 is a plain
// request, as a libzmq REQ socket sends it: one frame, handled with no
// deadline, no key and no cache, answered with the reply as one frame, or
// on error with two frames, "error:" + code and the message. So any ZeroMQ
// REQ client can call a Server as if it were a REP socket.
//
// # Guarantees
//
// A handler runs at most once per (client id, idempotency key) on an
// instance within ServerConfig.CacheWindow: a retry arriving while the
// first copy runs waits for its reply, and one arriving later gets the
// cached reply. Across instances there is no shared cache: a key says that
// running the handler again elsewhere is safe, and a call with a key is
// retried after an attempt timeout or when its instance's connection drops.
//
// A call without a key is sent again only when it is known not to have run:
// it could not be queued (its instance was not connected within the
// attempt timeout) or the server answered that it did not run it (shutting
// down, overloaded). When its instance dies or its connection drops before
// the reply, the call fails at once with ErrOutcomeUnknown rather than
// risk running twice; while the instance lives, it waits for the reply
// until its ctx ends. A call never outlives its ctx.
//
// Shutdown withdraws the advertisement, keeps answering new requests with
// StatusUnavailable (clients retry elsewhere at once) and finishes every
// accepted request before closing, so no accepted call is lost. Clients
// keep a withdrawn instance's connection until their calls to it are
// answered.
//
// # Routing
//
// Each attempt goes to one of two instances drawn at random from those
// that may get traffic and that the call has not tried yet: the connected
// one, then the one with fewer outstanding attempts from this client, then
// the one with the smaller gossip RTT, then the one with the smaller
// measured latency. Instances gossip reports failed are dropped at once;
// instances that withdrew or left drain; an instance with
// ClientConfig.EjectAfter consecutive failed attempts is ejected for
// ClientConfig.ProbeAfter, then gets one call at a time (half-open) until
// one succeeds. With no instance at all a call fails at once with
// ErrNoInstance, or waits with CallOptions.WaitForInstance.
//
// # Instances on the same host
//
// A server advertised in the mesh also listens on the unix socket twin of
// each tcp endpoint it advertises: tcp-HOST-PORT-nNET.sock (NET: the
// network namespace) in a directory only
// its user may write to (ServerConfig.NoLocalIPC, LocalIPCDir; default
// fastmq-<uid> in os.TempDir()). The twin is not advertised. A client
// looks for the twin of an instance's endpoint in its own directory, and
// when it is there (the instance runs on its host, as the same user)
// connects to it alone; other clients use tcp. A server that listens on
// every address (0.0.0.0) has the twin tcp-any-PORT-nNET.sock, which
// stands for each address of the host (gossip gives its endpoint the
// address it gossips from). A twin the client cannot connect to (left by
// a server that died) or whose handshake fails sends it back to tcp,
// with no request lost; after a handshake failure the client does not
// try that twin again, while a missing or refused one is looked for
// again by the instances it makes later (a server restarted at the same
// endpoint). InstanceStats.Endpoints says which endpoint an instance is
// reached at. Security is the same on both: a CURVE server is one on its
// twin too. Neither side uses twins when its socket has an Authenticator
// (an address rule refuses unix peers). Limits by source address (socket
// Config.MaxConnsPerSource, the PLAIN failure lockout) do not apply on
// twins, whose peers have no address: only processes of the server's
// own user, on its host, reach them. On loopback a call over the twin
// takes less CPU (in benchcmp/rpc, 16 callers on two cores: about a
// fifth) and so more calls go through.
//
// # Defaults
//
// Server: Concurrency 64, QueueSize 4 × Concurrency (beyond it requests
// are refused with StatusOverloaded), CacheWindow 1 min, CacheSize 100 000
// replies, DrainGrace 200 ms, endpoint tcp://127.0.0.1:0 and, when
// advertised, its unix socket twin. Client: 3
// retries, an attempt timeout of a third of the call's time (5 s without a
// deadline), backoff random up to 5 ms × 2^retry capped at 100 ms,
// EjectAfter 3, ProbeAfter 1 s, LatencyDecay 100 ms.
package rpc
