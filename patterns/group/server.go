package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/patterns/group/internal/durable"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/spool"
)

// maxLazyCommit caps ServerConfig.LazyCommit: a member's settle request
// waits 10 s for its answer. (A variable so that tests may hold lazy
// settles longer.)
var maxLazyCommit = time.Second

// ErrClosed is returned by calls on a closed Server or Member.
var ErrClosed = errors.New("group: closed")

// validName reports whether s is a valid stream or group name: 1 to 128
// of [A-Za-z0-9._-], not starting with '.' or '-'. (By hand: a regular
// expression here cost 1 % of a publisher's CPU, run for every request.)
func validName(s string) bool {
	if len(s) == 0 || len(s) > 128 || s[0] == '.' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// Defaults of a group's semantics (see MemberConfig).
const (
	DefaultAckWait       = 30 * time.Second
	DefaultMaxDeliver    = 5
	DefaultMaxAckPending = 1000
	// MaxLeaseFactor caps InProgress: a lease never lasts beyond this
	// many AckWaits from when it began.
	MaxLeaseFactor = 10
	// DefaultLazyCommit is how long a publisher holds a lazy settle
	// (the protocol's lazy flag) for the group commit; see ServerConfig.LazyCommit.
	DefaultLazyCommit = 5 * time.Millisecond

	// DefaultMaxMembers is ServerConfig.MaxMembers' default: the most
	// members of one group on a publisher.
	DefaultMaxMembers = 256
	// DefaultMaxMemberLeases is ServerConfig.MaxMemberLeases' default:
	// the most leases of one member on a publisher.
	DefaultMaxMemberLeases = 16384

	// DefaultMemberCheck is how often a server without a
	// ServerConfig.Watch looks at gossip for members that failed or left.
	DefaultMemberCheck = 200 * time.Millisecond
)

// Sender sends a reply to the peer of a ROUTER envelope;
// *pull.Server implements it.
type Sender interface {
	Send(env [][]byte, frames [][]byte) error
}

// MemberLister lists the nodes of the mesh; *discovery.Membership
// implements it.
type MemberLister interface {
	Members() []discovery.Member
}

// ServerConfig configures a group Server.
type ServerConfig struct {
	// Dir holds the groups' state files (Dir/<stream>/<group>.state).
	// Required.
	Dir string
	// Lookup returns the spool of a stream. Required.
	Lookup func(stream string) (*spool.Log, bool)
	// Open opens (creating) a stream's spool for the dead letters.
	// Required.
	Open func(stream string) (*spool.Log, error)
	// Send sends replies; the spool server the Server extends. Required.
	Send Sender
	// Members, if set, is looked at every MemberCheck: the leases of
	// members on nodes that left are released at once, on nodes that
	// stayed failed for FailedGrace then.
	Members     MemberLister
	MemberCheck time.Duration
	// Watch, if set, is watched for MemberService: the leases of the
	// members of a node that advertised it are released as soon as
	// gossip reports the node left, and FailedGrace after it reports it
	// failed unless it came back (its Removed and Added events), with no
	// polling. Members is then a safety net only: MemberCheck
	// defaults to DefaultMemberSafetyCheck.
	Watch ServiceWatcher
	// MaxWait caps a fetch's wait. Default 30 s.
	MaxWait time.Duration
	// LeaseAfterSync leases a stream's records only once they are
	// durable (after the publisher's fdatasync). By default the server
	// leases them as soon as they are written to the stream's file
	// (spool.Reader.ReadWritten), as a broker delivers what is in its page
	// cache: a stalled fdatasync does not hold up delivery. Publishers are
	// acknowledged once durable either way, and a process crash loses
	// nothing; only an OS crash can take records a member received, whose
	// publish was never acknowledged. The stream then reopens in a new
	// epoch and the group's state follows it (see the package doc).
	LeaseAfterSync bool
	// LazyCommit is how long a lazy settle (the protocol's lazy flag: Run's acks and
	// naks, which no caller waits for) may wait for the group commit
	// that writes it, so that one fdatasync takes those of many
	// requests. A settle without the flag (Message.Ack and the other
	// methods) is committed at once, with the lazy ones that wait (at
	// high rates it may queue at the member behind lazy requests in
	// flight, up to one LazyCommit). Default DefaultLazyCommit, at most
	// 1 s; negative: no wait.
	LazyCommit time.Duration
	// Authorize, if set, is asked about every request once decoded, with
	// the client's routing envelope (as the spool server hands it to its
	// extensions), what the request asks (Access) and its stream and group: an error is
	// answered StatusForbidden ("forbidden: " and the error's text,
	// ErrForbidden at the member), the same whether the stream exists or
	// not. It is called from the spool server's goroutine: keep it quick.
	Authorize func(env [][]byte, access Access, stream, group string) error
	// MaxMembers bounds the members of one group on this publisher: a
	// request of a member beyond it (a new member id) is refused with
	// StatusLimitReached. A member counts while it holds leases or has a
	// request of the last MaxWait plus AckWait (and, with a spool server
	// that tells, while its connection is open). Default
	// DefaultMaxMembers.
	MaxMembers int
	// MaxMemberLeases bounds the leases one member holds on this
	// publisher, whatever its MaxAckPending asks. Default
	// DefaultMaxMemberLeases, at most MaxMaxAckPending.
	MaxMemberLeases int
	// MemberLimit, if set, is asked when a new member id would join a
	// group, with the request's envelope: the most members the client
	// (its CURVE key, its PLAIN user; the NULL clients together) may have
	// in the group on this publisher, 0 for no limit. One beyond is
	// refused with StatusLimitReached; members count as for MaxMembers.
	// The node gives its ACL's "limit members" lines (pull.ACL).
	MemberLimit func(env [][]byte, stream, group string) int
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
}

// end is the end of what the server may lease from l: its written end,
// or with LeaseAfterSync its durable end.
func (s *Server) end(l *spool.Log) uint64 {
	if s.cfg.LeaseAfterSync {
		return l.NextOffset()
	}
	return l.WrittenOffset()
}

// Server owns the state of every consumer group of a publisher's streams
// and answers group requests (see the package doc). It is a
// pull.Extension: register it on a pull.Server with Register. A
// Server is safe for concurrent use; Handle never blocks on the network
// or the disk (acknowledgements are answered by the flusher goroutine
// once the state is written). Close is idempotent.
type Server struct {
	cfg ServerConfig
	log *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	noWait context.Context // ended from the start: reads that must not wait

	mu       sync.Mutex
	groups   map[string]*state // by stream + "\x00" + group
	watching map[string]bool   // streams with a tail watcher
	replies  []pendingReply    // waiting for the state to be written
	outbox   []pendingReply    // fetch replies to send, in order (postLocked)
	spare    []pendingReply    // the outbox's other buffer
	sending  bool              // a goroutine sends the outbox (unlockAndSend)
	dlq      []deadLetter      // waiting to be appended
	closed   bool
	nextTick time.Time // when the clock loop runs next

	journals map[string]*durable.Journal // by group key; the flusher's own

	incarnations map[string]incarnationState // per member node; guarded by mu

	wakeClock chan struct{}
	wakeFlush chan struct{} // a commit now
	wakeLazy  chan struct{} // a commit within LazyCommit

	replaying bool // a replay runs (one at a time); guarded by mu

	known    *known          // the groups whose state was written once (damage.go)
	damaged  map[string]bool // groups whose damage was logged; guarded by mu
	shareIDs bool            // tests only: member ids are not bound (bind.go); guarded by mu

	recTimes recordTimes // the times of the groups' floor records, for the stats
}

type pendingReply struct {
	env    [][]byte
	frames [][]byte
}

// state is one (stream, group) on the publisher: its durable state, and
// what the server keeps beside it. The server's mutex guards it.
type state struct {
	*durable.State
	// joined numbers the members told (logged) that the group's
	// settings are not theirs: see applySettingsLocked.
	joined    map[string]uint64
	joinSeq   uint64
	owners    map[string]*binding // the connection of each member id (bind.go)
	cnt       Counters
	parked    []*parkedFetch
	rd        *spool.Reader // at next, kept between fetches
	rdLog     *spool.Log
	rdWritten bool // rd reads up to the written end (spool.Reader.ReadWritten)
}

func newGroupState(st *durable.State) *state {
	return &state{State: st, joined: make(map[string]uint64)}
}

type parkedFetch struct {
	env      [][]byte
	req      wire.Request
	deadline time.Time
}

type deadLetter struct {
	stream, group string
	offset        uint64
	deliveries    uint32
	reason        string
	history       []durable.Attempt // the record's failed deliveries, the last one last
}

// NewServer starts a group server.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Dir == "" || cfg.Lookup == nil || cfg.Open == nil || cfg.Send == nil {
		return nil, errors.New("group: server needs Dir, Lookup, Open and Send")
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 30 * time.Second
	}
	if cfg.LazyCommit == 0 {
		cfg.LazyCommit = DefaultLazyCommit
	}
	if cfg.MaxMembers <= 0 {
		cfg.MaxMembers = DefaultMaxMembers
	}
	if cfg.MaxMemberLeases <= 0 {
		cfg.MaxMemberLeases = DefaultMaxMemberLeases
	}
	cfg.MaxMemberLeases = min(cfg.MaxMemberLeases, MaxMaxAckPending)
	cfg.LazyCommit = min(cfg.LazyCommit, maxLazyCommit)
	if cfg.MemberCheck <= 0 {
		cfg.MemberCheck = DefaultMemberCheck
		if cfg.Watch != nil {
			cfg.MemberCheck = DefaultMemberSafetyCheck
		}
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: lg.With("component", "group-server"),
		groups: make(map[string]*state), watching: make(map[string]bool), journals: make(map[string]*durable.Journal),
		incarnations: make(map[string]incarnationState),
		known:        loadKnown(cfg.Dir), damaged: make(map[string]bool),
		wakeClock: make(chan struct{}, 1), wakeFlush: make(chan struct{}, 1), wakeLazy: make(chan struct{}, 1)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	var end context.CancelFunc
	s.noWait, end = context.WithCancel(context.Background())
	end()
	s.wg.Add(2)
	go s.clockLoop()
	go s.flushLoop()
	if cfg.Watch != nil {
		if err := s.startGoneWatch(); err != nil {
			s.Close()
			return nil, fmt.Errorf("group: watch members: %w", err)
		}
	}
	return s, nil
}

// Close stops the server's goroutines after writing the state of every
// group. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	err := s.flush()
	for _, j := range s.journals {
		j.Close()
	}
	s.mu.Lock()
	for _, g := range s.groups {
		if g.rd != nil {
			g.rd.Close()
			g.rd = nil
		}
	}
	s.mu.Unlock()
	return err
}

// Access is what a request asks of its stream, for ServerConfig.Authorize.
type Access int

// Kinds of access.
const (
	AccessRead  Access = iota // a member's requests; reading dead letters
	AccessList                // listing groups, a group's state (info)
	AccessAdmin               // seek, replay of dead letters, configure
)

// accessOf returns what a request of op asks.
func accessOf(op wire.Op) Access {
	switch op {
	case wire.OpList, wire.OpInfo:
		return AccessList
	case wire.OpSeek, wire.OpReplay, wire.OpConfigure:
		return AccessAdmin
	}
	return AccessRead
}

// Handle answers one request (see pull.Extension).
func (s *Server) Handle(env [][]byte, frames [][]byte) {
	if len(frames) > 0 && len(frames[0]) > 0 && frames[0][0] != wire.Version {
		s.sendFrames(env, wire.Unsupported(frames))
		return
	}
	req, err := wire.DecodeRequest(frames)
	if err != nil {
		var id uint32
		if len(frames) > 0 && len(frames[0]) >= 6 {
			id = uint32(frames[0][2])<<24 | uint32(frames[0][3])<<16 | uint32(frames[0][4])<<8 | uint32(frames[0][5])
		}
		s.send(env, &wire.Reply{Status: wire.StatusBadRequest, ID: id, Data: []byte(err.Error())})
		return
	}
	if s.cfg.Authorize != nil {
		if err := s.cfg.Authorize(env, accessOf(req.Op), req.Stream, req.Group); err != nil {
			s.send(env, &wire.Reply{Status: wire.StatusForbidden, ID: req.ID, Data: []byte("forbidden: " + err.Error())})
			return
		}
	}
	if req.Op >= wire.OpList && req.Op <= wire.OpReplay {
		s.handleAdmin(env, req)
		return
	}
	s.noteIncarnation(req.Member)
	if !validName(req.Group) {
		s.send(env, &wire.Reply{Status: wire.StatusBadRequest, ID: req.ID, Data: []byte(fmt.Sprintf("bad group name %q", req.Group))})
		return
	}
	l, ok := s.cfg.Lookup(req.Stream)
	if !ok {
		s.send(env, &wire.Reply{Status: wire.StatusUnknown, ID: req.ID, Data: []byte("unknown stream " + req.Stream)})
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.send(env, &wire.Reply{Status: wire.StatusUnavailable, ID: req.ID, Data: []byte("server closing")})
		return
	}
	g, err := s.groupLocked(req, l)
	if err != nil {
		s.mu.Unlock()
		st := wire.StatusInternal
		if errors.Is(err, ErrStateLost) {
			st = wire.StatusUnavailable
		}
		s.send(env, &wire.Reply{Status: st, ID: req.ID, Data: []byte(err.Error())})
		return
	}
	if g == nil {
		s.mu.Unlock()
		s.send(env, &wire.Reply{Status: wire.StatusUnknown, ID: req.ID, Data: []byte(fmt.Sprintf("unknown group %s of stream %s", req.Group, req.Stream))})
		return
	}
	if req.Op != wire.OpInfo && req.Op != wire.OpSeek && req.Op != wire.OpConfigure {
		if rep := s.bindLocked(g, env, req, time.Now()); rep != nil {
			s.mu.Unlock()
			s.send(env, rep)
			return
		}
	}
	switch req.Op {
	case wire.OpFetch:
		s.fetchLocked(g, l, env, req)
		return // unlocked by fetchLocked
	case wire.OpInfo:
		st := g.stats(l, s.end)
		s.mu.Unlock()
		s.completeStats(&st, l)
		b, _ := json.Marshal(st)
		s.send(env, &wire.Reply{Status: wire.StatusOK, ID: req.ID, Data: b})
		return
	case wire.OpSeek:
		// Answered once the moved state is on disk, as a settle is.
		s.seekLocked(g, l, req)
		s.kickLocked(g, l)
		s.replies = append(s.replies, pendingReply{env, wire.EncodeReply(&wire.Reply{Status: wire.StatusOK, ID: req.ID})})
		s.unlockAndSend()
		s.wakeFlusher()
		return
	case wire.OpConfigure:
		// An operator's: the only change of a group's settings once it
		// exists; answered once written, as a seek is.
		set := settingsOf(req, g.Set)
		s.log.Info("group configured", "stream", g.Stream, "group", g.Group, "ack_wait", set.AckWait, "max_deliver", set.MaxDeliver,
			"backoff", set.Backoff, "was_ack_wait", g.Set.AckWait, "was_max_deliver", g.Set.MaxDeliver, "was_backoff", g.Set.Backoff)
		g.Set, g.Dirty = set, true
		s.replies = append(s.replies, pendingReply{env, wire.EncodeReply(&wire.Reply{Status: wire.StatusOK, ID: req.ID})})
		s.unlockAndSend()
		s.wakeFlusher()
		return
	}
	rep := s.settleLocked(g, req)
	s.kickLocked(g, l)
	s.replies = append(s.replies, pendingReply{env, wire.EncodeReply(rep)})
	s.unlockAndSend()
	if req.Flags&wire.FlagLazy != 0 && s.cfg.LazyCommit > 0 {
		select {
		case s.wakeLazy <- struct{}{}:
		default:
		}
		return
	}
	s.wakeFlusher()
}

// wakeAtLocked makes the clock loop run by t.
func (s *Server) wakeAtLocked(t time.Time) {
	if !t.Before(s.nextTick) {
		return
	}
	s.nextTick = t
	s.signalClock()
}

func (s *Server) signalClock() {
	select {
	case s.wakeClock <- struct{}{}:
	default:
	}
}

func (s *Server) send(env [][]byte, r *wire.Reply) { s.sendFrames(env, wire.EncodeReply(r)) }

// nodeOf returns the node name of a member id ("node/incarnation.random").
func nodeOf(member string) string {
	if i := strings.LastIndexByte(member, '/'); i >= 0 {
		return member[:i]
	}
	return member
}

// incarnationOf returns the incarnation of a member id
// ("node/incarnation.random"; "" for an id without one).
func incarnationOf(member string) string {
	rest := member[strings.LastIndexByte(member, '/')+1:]
	if i := strings.IndexByte(rest, '.'); i >= 0 {
		return rest[:i]
	}
	return ""
}
