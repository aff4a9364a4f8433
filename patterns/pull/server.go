package pull

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// ErrClosed is returned by calls on a closed Server or Consumer.
var ErrClosed = errors.New("pull: closed")

// ServerConfig configures a spool Server. The zero value serves nothing:
// Lookup is required.
type ServerConfig struct {
	// Endpoints to bind the ROUTER socket to. Default: tcp://127.0.0.1:0.
	Endpoints []string
	// Lookup returns the spool of a stream, or false if this publisher has
	// no such stream. It is called from the server's goroutines and must be
	// safe for concurrent use.
	Lookup func(stream string) (*spool.Log, bool)
	// MaxBytes caps the data of one reply. Default 4 MiB. A single batch
	// larger than this is still served whole.
	MaxBytes int
	// MaxWait caps how long a fetch at the tail is held. Default 30s.
	MaxWait time.Duration
	// Socket configures the ROUTER socket (PLAIN credentials, HWM,
	// heartbeats). Its Logger defaults to Logger. Its memory bounds
	// default to what a server needs (see Server for the budget they
	// make): MaxMsgSize 4 KiB (requests are under 300 bytes),
	// RecvHWMBytes 1 MiB, SendHWMBytes MaxBytes + 64 KiB (one reply),
	// SendHWMBytesTotal 8 x MaxBytes (32 MiB), MaxConns 1024 and
	// MaxConnsPerSource 64. RouterMandatory is refused: replies to a
	// peer that does not read must be dropped, not wait.
	Socket socket.Config
	// ACL, when set, says which clients may read which streams (see ACL);
	// a request for any other stream, existing or not, gets
	// StatusForbidden. nil lets every client that the socket admitted
	// read every stream. SetACL replaces it.
	ACL *ACL
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// Served, if set, is called each time a reply carrying the records
	// from..next-1 of stream has been handed to the socket: for
	// benchmarks and for tracing a record's path (fastmq bench pull
	// splits durable-to-delivered with it). It runs on the server's
	// goroutines and must return quickly.
	Served func(stream string, from, next uint64)
}

// ServerStats are the server's counters since it started.
type ServerStats struct {
	Requests       uint64 `json:"requests"`        // requests received, malformed ones included
	BadRequests    uint64 `json:"bad_requests"`    // malformed requests
	Replies        uint64 `json:"replies"`         // replies sent
	BytesServed    uint64 `json:"bytes_served"`    // raw batch bytes sent
	RecordsServed  uint64 `json:"records_served"`  // records in the batches sent, counted from the requested offset
	Parked         int    `json:"parked"`          // fetches currently waiting for data
	SendsFailed    uint64 `json:"sends_failed"`    // replies that could not be sent
	OutOfRange     uint64 `json:"out_of_range"`    // fetches below the oldest retained offset or beyond the end
	UnknownStreams uint64 `json:"unknown_streams"` // fetches for streams this publisher does not have
	Gaps           uint64 `json:"gaps"`            // fetches answered StatusGap: the offset lies in a gap of the log
	Damaged        uint64 `json:"damaged"`         // fetches refused because the batch holding the offset is damaged
	OtherLog       uint64 `json:"other_log"`       // fetches refused with StatusOtherLog: the position is of another log
	Diverged       uint64 `json:"diverged"`        // fetches answered StatusDiverged: the log lost records the consumer read
	Forbidden      uint64 `json:"forbidden"`       // requests the ACL refused (StatusForbidden), group requests included
}

// Server serves fetch requests for local spools over a ROUTER socket.
//
// A Server is safe for concurrent use. Requests for data that is already
// on disk are answered at once, straight from the spool's stored batches
// (still compressed); requests at the tail are parked until data arrives or
// their wait ends (long polling). A slow consumer costs the server nothing
// but the disk its data occupies: nothing is sent that was not asked for.
//
// Memory: replies wait in the ROUTER's queue for their peer, at most
// Socket.SendHWMBytes per peer (one reply, by default) and
// Socket.SendHWMBytesTotal for all peers together (32 MiB by default).
// While little of the total is left, replies are cut to fit it (down to
// 64 KiB); a reply past either bound is dropped (counted in the socket's
// Stats.Dropped) and the consumer asks again when its request times out. Replies never wait, so a peer
// that does not read never holds up the others. Each connection also
// costs its buffers (about 150 KiB), at most Socket.MaxConns of them
// (1024) and Socket.MaxConnsPerSource (64) per address, and each of the
// server's goroutines that answer (the receive loop, the expiry loop and
// one per stream with parked fetches) holds at most one reply being
// built (MaxBytes). So whatever one address does, with the defaults it
// costs at most about 32 MiB of replies and 10 MiB of connections, and
// all of it is freed when its connections end.
type Server struct {
	cfg  ServerConfig
	log  *slog.Logger
	sock *socket.Socket
	eps  []string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	sendMu    sync.Mutex
	sendTotal int64 // the socket's SendHWMBytesTotal

	mu       sync.Mutex
	parked   map[string][]*parkedFetch // by stream
	perPeer  map[string]int            // parked fetches by ROUTER identity
	nParked  int
	earliest time.Time // earliest deadline the expiry loop is waiting for
	watching map[string]bool
	wakeExp  chan struct{}
	closed   bool

	requests, bad, replies, bytes, records, sendFails, oor, unknown, gaps, damaged atomic.Uint64

	pos positionCounters // fetches the position check refused (position.go)

	acl       atomic.Pointer[aclIndex] // nil: no access control (acl.go)
	forbidden atomic.Uint64

	extMu sync.Mutex
	ext   map[uint8]Extension // by version byte (HandleVersion)

	clients clientTable // who fetched what (clients.go)
}

// NewServer binds the ROUTER socket and starts serving.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Lookup == nil {
		return nil, errors.New("pull: server needs a Lookup function")
	}
	if len(cfg.Endpoints) == 0 {
		cfg.Endpoints = []string{"tcp://127.0.0.1:0"}
	} else {
		cfg.Endpoints = append([]string(nil), cfg.Endpoints...)
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 4 << 20
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 30 * time.Second
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "pull-server")
	acl, err := compileACL(cfg.ACL)
	if err != nil {
		return nil, err
	}
	scfg, err := serverSocketConfig(cfg.Socket, cfg.MaxBytes)
	if err != nil {
		return nil, err
	}
	if scfg.Logger == nil {
		scfg.Logger = cfg.Logger
	}
	sock, err := socket.New(socket.Router, scfg)
	if err != nil {
		return nil, fmt.Errorf("pull: create server socket: %w", err)
	}
	s := &Server{
		sendTotal: scfg.SendHWMBytesTotal,
		cfg:       cfg,
		log:       lg,
		sock:      sock,
		parked:    make(map[string][]*parkedFetch),
		perPeer:   make(map[string]int),
		watching:  make(map[string]bool),
		wakeExp:   make(chan struct{}, 1),
	}
	s.acl.Store(acl)
	for _, ep := range cfg.Endpoints {
		bound, err := sock.Bind(ep)
		if err != nil {
			sock.Close()
			return nil, fmt.Errorf("pull: bind %s: %w", ep, err)
		}
		s.eps = append(s.eps, bound)
		lg.Info("serving spools", "endpoint", bound)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(2)
	go s.recvLoop()
	go s.expiryLoop()
	return s, nil
}

// serverSocketConfig applies the server's defaults for its ROUTER's
// memory bounds (see ServerConfig.Socket).
func serverSocketConfig(c socket.Config, maxBytes int) (socket.Config, error) {
	if c.RouterMandatory {
		return c, errors.New("pull: a server's socket cannot use RouterMandatory: replies to a peer that does not read would wait")
	}
	if c.MaxMsgSize == 0 {
		c.MaxMsgSize = 4 << 10
	}
	if c.RecvHWMBytes == 0 {
		c.RecvHWMBytes = 1 << 20
	}
	if c.SendHWMBytes == 0 {
		c.SendHWMBytes = int64(maxBytes) + 64<<10
	}
	if c.SendHWMBytesTotal == 0 {
		c.SendHWMBytesTotal = 8 * int64(maxBytes)
	}
	if c.MaxConns == 0 {
		c.MaxConns = 1024
	}
	if c.MaxConnsPerSource == 0 {
		c.MaxConnsPerSource = 64
	}
	return c, nil
}

// Endpoints returns the bound endpoints, with wildcard ports resolved.
// The caller owns the returned slice.
func (s *Server) Endpoints() []string { return append([]string(nil), s.eps...) }

// Stats returns the server's counters.
func (s *Server) Stats() ServerStats {
	s.mu.Lock()
	n := s.nParked
	s.mu.Unlock()
	return ServerStats{
		Requests: s.requests.Load(), BadRequests: s.bad.Load(), Replies: s.replies.Load(),
		BytesServed: s.bytes.Load(), RecordsServed: s.records.Load(), Parked: n,
		SendsFailed: s.sendFails.Load(), OutOfRange: s.oor.Load(), UnknownStreams: s.unknown.Load(),
		Gaps: s.gaps.Load(), Damaged: s.damaged.Load(),
		OtherLog: s.pos.otherLog.Load(), Diverged: s.pos.diverged.Load(), Forbidden: s.forbidden.Load(),
	}
}

// Close stops serving and returns after every goroutine of the server has
// exited. Parked fetches are answered with StatusUnavailable when possible.
// Close is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	parked := s.parked
	s.parked = map[string][]*parkedFetch{}
	s.mu.Unlock()
	s.cancel()
	for _, list := range parked {
		for _, p := range list {
			s.reply(p.env, &Reply{Version: p.req.Version, Status: StatusUnavailable, ID: p.req.ID, Data: []byte("server closing")})
		}
	}
	s.cancel()
	err := s.sock.Close()
	s.wg.Wait()
	s.extMu.Lock()
	exts := s.ext
	s.ext = nil
	s.extMu.Unlock()
	for _, e := range exts {
		if cerr := e.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

func (s *Server) recvLoop() {
	defer s.wg.Done()
	for {
		m, err := s.sock.Recv(s.ctx)
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, socket.ErrClosed) {
				return
			}
			s.log.Warn("receive failed", "err", err)
			continue
		}
		s.requests.Add(1)
		if len(m.Frames) < 2 {
			s.bad.Add(1)
			continue
		}
		env := m.Frames[:1]
		if ext := s.extension(m.Frames[1:]); ext != nil {
			ext.Handle(env, m.Frames[1:])
			continue
		}
		req, err := DecodeRequest(m.Frames[1:])
		if err != nil {
			s.bad.Add(1)
			if s.log.Enabled(s.ctx, slog.LevelDebug) {
				s.log.Debug("bad request", "err", err)
			}
			s.reply(env, &Reply{Version: replyVersion(m.Frames[1:]), Status: StatusBadRequest, Data: []byte(err.Error())})
			continue
		}
		s.handle(env, req)
	}
}

// handle answers req now, or parks it if it waits at the tail.
func (s *Server) handle(env [][]byte, req Request) {
	if req.Op == OpReaders {
		s.replyReaders(env, req)
		return
	}
	if !s.Allowed(env, req.Stream) {
		s.replyForbidden(env, req)
		return
	}
	l, ok := s.cfg.Lookup(req.Stream)
	if !ok {
		s.unknown.Add(1)
		s.reply(env, &Reply{Version: req.Version, Status: StatusUnknown, ID: req.ID, Data: []byte("unknown stream " + req.Stream)})
		return
	}
	if s.refusePosition(l, env, req) {
		return
	}
	switch req.Op {
	case OpMeta:
		next := l.NextOffset()
		s.reply(env, &Reply{Version: req.Version, Status: StatusOK, ID: req.ID, Next: next, Oldest: l.OldestOffset(), High: next})
		return
	case OpSeekTime:
		off, err := l.SeekTime(time.Unix(0, int64(req.Offset)))
		if err != nil {
			s.reply(env, &Reply{Version: req.Version, Status: StatusInternal, ID: req.ID, Data: []byte(err.Error())})
			return
		}
		s.reply(env, &Reply{Version: req.Version, Status: StatusOK, ID: req.ID, Next: off, Oldest: l.OldestOffset(), High: l.NextOffset()})
		return
	}
	if next := l.NextOffset(); req.Offset > next {
		// Ahead of the log: the publisher's spool was replaced by a
		// shorter one. The consumer decides, as for offsets below
		// retention.
		s.oor.Add(1)
		s.reply(env, &Reply{Version: req.Version, Status: StatusOutOfRange, ID: req.ID, Next: req.Offset, Oldest: l.OldestOffset(), High: next,
			Data: []byte(fmt.Sprintf("offset %d is beyond the end of the log (next %d)", req.Offset, next))})
		return
	}
	s.sawFetch(env, req, l.NextOffset())
	if req.Offset >= l.NextOffset() && req.MaxWaitMillis > 0 {
		wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
		if wait > s.cfg.MaxWait {
			wait = s.cfg.MaxWait
		}
		s.park(l, env, req, time.Now().Add(wait))
		return
	}
	s.serve(l, env, req)
}

// serve reads from the spool and replies, without waiting.
func (s *Server) serve(l *spool.Log, env [][]byte, req Request) {
	limit := int(req.MaxBytes)
	if limit <= 0 || limit > s.cfg.MaxBytes {
		limit = s.cfg.MaxBytes
	}
	// With many replies waiting, send smaller ones rather than have them
	// dropped (a consumer waits for a dropped reply until its request
	// times out).
	if room := s.sendTotal - s.sock.QueuedBytes() - minReply; int64(limit) > room {
		limit = int(max(room, minReply))
	}
	data, _, err := l.ReadRaw(req.Offset, limit)
	high := l.NextOffset()
	oldest := l.OldestOffset()
	if err != nil {
		var oor *spool.OutOfRangeError
		if errors.As(err, &oor) || errors.Is(err, spool.ErrOutOfRange) {
			s.oor.Add(1)
			s.reply(env, &Reply{Version: req.Version, Status: StatusOutOfRange, ID: req.ID, Next: req.Offset, Oldest: oldest, High: high, Data: []byte(err.Error())})
			return
		}
		s.log.Error("read spool", "stream", req.Stream, "offset", req.Offset, "err", err)
		s.reply(env, &Reply{Version: req.Version, Status: StatusInternal, ID: req.ID, Next: req.Offset, Oldest: oldest, High: high, Data: []byte(err.Error())})
		return
	}
	next := req.Offset
	if len(data) > 0 {
		// Checked, not trusted: a spool checks only the batch headers
		// of older segments when it opens, and disks rot afterwards.
		data, next, err = checkRaw(data, req.Offset)
	}
	if err != nil {
		var gap *gapError
		switch {
		case errors.As(err, &gap) && req.Version >= 2:
			s.gaps.Add(1)
			if s.log.Enabled(s.ctx, slog.LevelDebug) {
				s.log.Debug("fetch in a gap", "stream", req.Stream, "offset", req.Offset, "next", gap.next)
			}
			s.reply(env, &Reply{Version: req.Version, Status: StatusGap, ID: req.ID, Next: gap.next, Oldest: oldest, High: high, Data: []byte(err.Error())})
			return
		case gap == nil:
			s.damaged.Add(1)
			s.log.Error("damaged batch in spool", "stream", req.Stream, "offset", req.Offset, "err", err)
			status := StatusDamaged
			if req.Version < 2 {
				status = StatusInternal
			}
			s.reply(env, &Reply{Version: req.Version, Status: status, ID: req.ID, Next: req.Offset, Oldest: oldest, High: high, Data: []byte(err.Error())})
			return
		}
		// A version 1 consumer gets the batches after the gap, as version
		// 1 servers sent them.
	}
	rep := &Reply{Version: req.Version, Status: StatusOK, ID: req.ID, Next: next, Oldest: oldest, High: high, Data: data}
	stamp(l, req, rep)
	data, next = rep.Data, rep.Next
	if next > req.Offset {
		s.records.Add(next - req.Offset)
	}
	s.bytes.Add(uint64(len(data)))
	s.reply(env, rep)
	if s.cfg.Served != nil && next > req.Offset {
		s.cfg.Served(req.Stream, req.Offset, next)
	}
}

// minReply is the least data a reply may be cut to when the socket's
// send budget runs short.
const minReply = 64 << 10

// replyVersion returns the version to answer an undecodable request in:
// its own if the server speaks it, otherwise the oldest, which every
// consumer reads (a newer consumer then falls back to it).
func replyVersion(frames [][]byte) uint8 {
	if len(frames) > 0 && len(frames[0]) > 0 {
		if v := frames[0][0]; v >= minProtocolVersion && v <= ProtocolVersion {
			return v
		}
	}
	return minProtocolVersion
}

func (s *Server) reply(env [][]byte, r *Reply) {
	if s.send(env, EncodeReply(r)) == nil {
		s.replies.Add(1)
	}
}

func (s *Server) send(env [][]byte, frames [][]byte) error {
	msg := socket.Msg{Frames: make([][]byte, 0, len(env)+len(frames))}
	msg.Frames = append(msg.Frames, env...)
	msg.Frames = append(msg.Frames, frames...)
	// A reply never waits for room in the peer's queue: the ROUTER is
	// never RouterMandatory (serverSocketConfig refuses it), so a full
	// queue drops the reply (counted in the socket's stats) and one slow
	// peer cannot hold up the others. No deadline is needed, nor its
	// timer per reply.
	s.sendMu.Lock()
	err := s.sock.Send(context.Background(), msg)
	s.sendMu.Unlock()
	if err != nil {
		s.sendFails.Add(1)
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("send reply failed", "err", err)
		}
		return err
	}
	return nil
}

// HasACL reports whether the server has an ACL (ServerConfig.ACL,
// SetACL).
func (s *Server) HasACL() bool { return s.acl.Load() != nil }

// AllowedCredentials reports whether the ACL lets the client cred do op
// on stream, as AllowedOp does for a peer of the socket: for a caller
// authenticated some other way (the node's HTTP side, by token). No ACL
// allows every client.
func (s *Server) AllowedCredentials(cred socket.PeerCredentials, op ACLOp, stream string) bool {
	ix := s.acl.Load()
	return ix == nil || ix.allowsOp(cred, op, stream)
}
