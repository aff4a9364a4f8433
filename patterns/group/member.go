package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// StreamWatcher finds the publishers of a stream; *discovery.Membership
// implements it.
type StreamWatcher interface {
	WatchStream(ctx context.Context, stream string) (<-chan discovery.Event, error)
}

// MemberConfig configures a Member. The semantics fields are sent to the
// publishers with every fetch: the members of one group should agree on
// them (the last fetch's win).
type MemberConfig struct {
	Stream string // required
	Group  string // required
	// Name prefixes the member's id ("Name/Incarnation.random"; see ID).
	// A publisher releases the leases of a member when gossip says the
	// node called Name left, or failed (after FailedGrace), so with
	// Discovery it must be the node's gossip name; it names one process
	// (or node). Default: none ("member", without an incarnation).
	Name string
	// Incarnation names this start of the member's process (or node): a
	// publisher that sees a member of node Name with another incarnation
	// than before takes it for a new process, and releases the leases of
	// the old incarnation's members at once (a node restarted within
	// FailedGrace on the same gossip address looks to gossip like the
	// same process). Letters, digits, '_' and '-', at most 32. Default:
	// one random value per process; a Node sets one per start. Only a
	// member with a Name has one: two processes whose members share a
	// Name release each other's leases.
	Incarnation string
	// Discovery finds the publishers of Stream; or Publishers lists their
	// spool endpoints (by node name). One of them is required.
	Discovery  StreamWatcher
	Publishers map[string]string
	// AckWait is a lease's length, from the moment a publisher leases the
	// record to this member; while the record waits in the member's
	// buffer its lease is extended, so that the handler that takes it
	// has at least 29/32 of AckWait (see the package doc for the
	// conditions). Default 30 s. InProgress extends it.
	// AckWait, MaxDeliver and Backoff are the group's: a publisher takes
	// those of the member whose fetch creates the group there; a later
	// member's do not change them, only Configure does (see the package
	// doc).
	AckWait time.Duration
	// MaxDeliver: a record delivered this many times and not acknowledged
	// goes to the dead-letter stream. Default 5; -1 = unlimited.
	MaxDeliver int
	// Backoff is the redelivery delay after the n-th failed delivery (the
	// last value repeats). Default none: at once.
	Backoff []time.Duration
	// MaxAckPending caps the leases this member holds on each publisher.
	// Default 1000.
	MaxAckPending int
	// Buffer is how many leased records the member holds that Next has
	// not returned yet, all publishers together. Default 64. A fetch
	// asks for the free room (at least half the buffer while records
	// wait), so a larger buffer makes larger batches (bench group: about
	// 4x the throughput at 128 than at 16). Two fetches per publisher
	// are open at a time (the protocol's pipeline flag), each asking for at most half
	// the buffer: handlers faster than a round trip to the publisher run
	// dry between replies, and a larger buffer then also costs less CPU
	// per record (fewer, larger fetches). Buffered records' leases are
	// kept while they wait (see AckWait), but a record in the buffer is
	// one no other member can take: keep Buffer times a record's
	// handling time, divided by the handlers running at once, short.
	// Besides the Buffer slots, each publisher's link has one reserve
	// slot, used while Next waits with nothing buffered and no fetch of
	// that link is open (with more than one publisher), so that a fetch
	// waits at every publisher however many there are: the member holds
	// at most Buffer records plus one per publisher (for a moment one
	// more, while the debt of a link just stopped is repaid).
	Buffer int
	// Start places a new group's cursor on each publisher. Default
	// spool.Earliest().
	Start spool.Start
	// Ordered makes a new group ordered by key (the fastmq-key header,
	// see Key): records of one key are never in flight to two members at
	// once and are delivered in offset order; different keys go in
	// parallel. A failing record is retried in place, up to MaxDeliver,
	// then dead-lettered. Fixed when the group is created.
	Ordered bool
	// MaxWait is how long a fetch waits at a publisher for records.
	// Default 5 s.
	MaxWait time.Duration
	// Socket configures the DEALER sockets.
	Socket socket.Config
	// Logger receives the member's logs; nil discards them.
	Logger *slog.Logger
	// OnForbidden, if set, is called by Run with the error of each
	// publisher that refused the member the stream (ErrForbidden), which
	// Run otherwise only logs as it goes on with the others: a program
	// that wants to stop cancels Run's context there. It must not block.
	OnForbidden func(err error)
}

// Member is one member of a consumer group: it leases records from every
// publisher of the stream. A Member is safe for concurrent use: Next and
// the Message methods may be called from many goroutines. Next blocks
// until a record is leased. Shutdown leaves the group gracefully, Close
// stops at once; both are idempotent, and after either Next returns
// ErrClosed.
type Member struct {
	cfg MemberConfig
	id  string
	log *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	out    chan *chunk // leased records, in the fetch loops' chunks
	credit *credit     // free buffer slots
	errs   chan error  // publishers that stopped serving this member (ErrForbidden)

	qmu   sync.Mutex
	queue []queued // chunks taken from out, being handed out
	// inbuf lists the chunks given to out whose records were not all
	// handed out, for keepLeases. Guarded by qmu.
	inbuf []*chunk
	// queued is len(queue), for the fetch loops to tell an empty buffer
	// without the lock.
	queued atomic.Int32
	// sleepers counts the next calls waiting on out; wake tells one of
	// them that the queue holds records (a chunk another took from out).
	sleepers atomic.Int32
	wake     chan struct{}

	// hungry, when not nil, is closed once a Next call waits with no
	// record buffered: a fetch loop waiting for slots may then take its
	// link's reserve. Guarded by qmu.
	hungry chan struct{}

	mu     sync.Mutex
	links  map[string]*link // by publisher node
	nlinks atomic.Int32     // len(links)
	closed bool
	// stopped is closed once Close or Shutdown stopped the member.
	stopped chan struct{}
}

// CheckName returns an error unless name is a valid stream or group
// name: 1 to 128 letters, digits, '_', '.' and '-', not starting with
// '.' or '-'.
func CheckName(name string) error {
	if !validName(name) {
		return fmt.Errorf("bad name %q: want 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'", name)
	}
	return nil
}

// NewMember starts a member.
func NewMember(cfg MemberConfig) (*Member, error) {
	if !validName(cfg.Stream) || !validName(cfg.Group) {
		return nil, fmt.Errorf("group: bad stream %q or group %q", cfg.Stream, cfg.Group)
	}
	if cfg.Discovery == nil && len(cfg.Publishers) == 0 {
		return nil, errors.New("group: member needs Discovery or Publishers")
	}
	if cfg.Start.Kind > spool.StartTime {
		return nil, fmt.Errorf("group: unknown start kind %d", cfg.Start.Kind)
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = DefaultAckWait
	}
	switch {
	case cfg.MaxDeliver == 0:
		cfg.MaxDeliver = DefaultMaxDeliver
	case cfg.MaxDeliver < 0:
		cfg.MaxDeliver = 0
	}
	if cfg.MaxAckPending <= 0 {
		cfg.MaxAckPending = DefaultMaxAckPending
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 64
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 5 * time.Second
	}
	if len(cfg.Backoff) > wire.MaxBackoff {
		return nil, fmt.Errorf("group: at most %d backoff values", wire.MaxBackoff)
	}
	for _, d := range cfg.Backoff {
		// The wire carries whole milliseconds in 32 bits: a negative
		// value would wrap to weeks.
		if d < 0 || d/time.Millisecond > math.MaxUint32 {
			return nil, fmt.Errorf("group: backoff value %v out of range (0 to %v)", d, time.Duration(math.MaxUint32)*time.Millisecond)
		}
	}
	cfg.Backoff = append([]time.Duration(nil), cfg.Backoff...)
	// An unnamed member stands for no node: every unnamed member of every
	// process shares the name, so an incarnation would have each process
	// taken for a restart of the others, and their leases released.
	named := cfg.Name != ""
	if !named {
		cfg.Name = "member"
	}
	if cfg.Incarnation == "" {
		cfg.Incarnation = processIncarnation
	}
	if !incarnationRE.MatchString(cfg.Incarnation) {
		return nil, fmt.Errorf("group: bad incarnation %q", cfg.Incarnation)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	id := cfg.Name + "/" + hex.EncodeToString(rnd[:])
	if named {
		id = cfg.Name + "/" + cfg.Incarnation + "." + hex.EncodeToString(rnd[:])
	}
	m := &Member{cfg: cfg, id: id,
		out: make(chan *chunk, cfg.Buffer), credit: newCredit(cfg.Buffer), errs: make(chan error, 64), wake: make(chan struct{}, 1), links: make(map[string]*link),
		stopped: make(chan struct{})}
	m.log = lg.With("component", "group-member", "stream", cfg.Stream, "group", cfg.Group)
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.wg.Add(1)
	go m.keepLeases()
	for node, ep := range cfg.Publishers {
		if err := m.startLink(node, ep); err != nil {
			m.Close()
			return nil, err
		}
	}
	if cfg.Discovery != nil {
		events, err := cfg.Discovery.WatchStream(m.ctx, cfg.Stream)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("group: watch stream %s: %w", cfg.Stream, err)
		}
		m.wg.Add(1)
		go m.discoverLoop(events)
	}
	return m, nil
}

// NewIncarnation returns a random incarnation (see
// MemberConfig.Incarnation), for one start of a process or node.
func NewIncarnation() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// processIncarnation is MemberConfig.Incarnation's default.
var processIncarnation = NewIncarnation()

var incarnationRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// ID returns the member's id, as publishers know it:
// "Name/Incarnation.random", or "member/random" without a Name.
func (m *Member) ID() string { return m.id }

func (m *Member) discoverLoop(events <-chan discovery.Event) {
	defer m.wg.Done()
	// Publishers gossip declared failed, with when: their links are kept
	// for LinkFailedGrace (see there).
	failed := make(map[string]time.Time)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-timer.C:
		case ev, ok := <-events:
			if !ok {
				return
			}
			node := ev.Instance.Node
			switch ev.Type {
			case discovery.Added, discovery.Updated:
				delete(failed, node)
				if len(ev.Instance.Service.Endpoints) > 0 {
					if err := m.startLink(node, ev.Instance.Service.Endpoints[0]); err != nil {
						m.log.Warn("connect to publisher", "peer", node, "err", err)
					}
				}
			case discovery.Removed:
				if ev.Reason != discovery.ReasonFailed {
					delete(failed, node)
					m.stopLink(node)
				} else if _, ok := failed[node]; !ok {
					failed[node] = time.Now()
				}
			}
		}
		now := time.Now()
		var next time.Time
		for node, at := range failed {
			due := at.Add(LinkFailedGrace)
			if !now.Before(due) {
				delete(failed, node)
				m.stopLink(node)
			} else if next.IsZero() || due.Before(next) {
				next = due
			}
		}
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
	}
}

func (m *Member) startLink(node, ep string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if old := m.links[node]; old != nil {
		if old.endpoint == ep {
			return nil
		}
		old.stop()
		delete(m.links, node)
	}
	ln, err := m.newLink(node, ep)
	if err != nil {
		return err
	}
	m.links[node] = ln
	m.nlinks.Store(int32(len(m.links)))
	return nil
}

func (m *Member) stopLink(node string) {
	m.mu.Lock()
	ln := m.links[node]
	delete(m.links, node)
	m.nlinks.Store(int32(len(m.links)))
	m.mu.Unlock()
	if ln != nil {
		ln.stop()
	}
}

func (m *Member) link(node string) *link {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.links[node]
}

// Next returns the next leased record, from any publisher. It blocks
// until one is leased, ctx ends or the member closes (ErrClosed). A
// publisher that refuses the member the stream (ErrForbidden) is not
// asked again; Next returns its error once, then goes on with the others.
func (m *Member) Next(ctx context.Context) (*Message, error) {
	return m.next(ctx, true)
}

// queued is a chunk of records from out, handed out one at a time; their
// buffer slots go back in counts of Buffer/8 (one channel operation per
// count, not per record), and when the chunk's last record is handed
// out.
type queued struct {
	c    *chunk
	owed int // records handed out whose slots did not go back yet
}

// chunk is a run of leased records from one fetch reply, in the buffer.
type chunk struct {
	rest []Message // not handed out yet; guarded by the member's qmu once in out
	// at is when the records' leases started as far as the member
	// knows (Unix ns): when the reply came, or when keepLeases last
	// extended them. Set before the chunk enters inbuf, then read and
	// written under the member's qmu (by keepLeases alone).
	at int64
}

// next hands out the next buffered record, as Next does; without wait it
// returns nil, nil when none is buffered. A record costs a lock here,
// where the buffer of old (a channel of records) cost a channel
// operation to hand it out and one to give its slot back.
func (m *Member) next(ctx context.Context, wait bool) (*Message, error) {
	for {
		m.qmu.Lock()
		if len(m.queue) > 0 {
			q := &m.queue[0]
			msg := &q.c.rest[0]
			q.c.rest = q.c.rest[1:]
			q.owed++
			n := 0
			if q.owed >= m.credit.batch() {
				n, q.owed = q.owed, 0
			}
			if len(q.c.rest) == 0 {
				n += q.owed
				q.c.rest = nil // the chunk's records are the handlers' now
				m.queue[0] = queued{}
				m.queue = m.queue[1:]
				m.queued.Add(-1)
				// Handed-out chunks leave inbuf at once, in the order
				// they came (keepLeases drops any left behind): held
				// there, their records could not be collected.
				for len(m.inbuf) > 0 && m.inbuf[0].rest == nil {
					m.inbuf[0] = nil
					m.inbuf = m.inbuf[1:]
				}
			}
			more := len(m.queue) > 0
			m.qmu.Unlock()
			if more && m.sleepers.Load() > 0 {
				// Records wait here while others wait on out: wake one
				// (who wakes the next, while records remain).
				select {
				case m.wake <- struct{}{}:
				default:
				}
			}
			m.credit.give(n)
			return msg, nil
		}
		m.qmu.Unlock()
		var b *chunk
		select { // fast path: one channel locked, not five
		case b = <-m.out:
		default:
			if !wait {
				return nil, nil
			}
			// Counted as waiting before the queue is looked at again:
			// a chunk queued meanwhile is seen here, or its taker sees
			// this call waiting and wakes it.
			m.sleepers.Add(1)
			if m.queued.Load() > 0 {
				m.sleepers.Add(-1)
				continue
			}
			if m.nlinks.Load() > 1 {
				m.signalHungry() // only fetch loops of several links watch
			}
			var err error
			select {
			case b = <-m.out:
			case <-m.wake:
			case err = <-m.errs:
			case <-ctx.Done():
				err = ctx.Err()
			case <-m.ctx.Done():
				err = ErrClosed
			}
			m.sleepers.Add(-1)
			if err != nil {
				return nil, err
			}
			if b == nil {
				continue // woken: the queue holds records
			}
		}
		m.qmu.Lock()
		m.queue = append(m.queue, queued{c: b})
		m.queued.Add(1)
		if m.hungry != nil && m.sleepers.Load() > 0 && len(m.out) == 0 {
			// Others wait and took nothing: a fetch loop that looked
			// while this chunk was in out may now take its reserve.
			close(m.hungry)
			m.hungry = nil
		}
		m.qmu.Unlock()
	}
}

// Shutdown leaves the group gracefully: each publisher is told to release
// this member's leases at once, and Shutdown waits for their answers until
// ctx ends; then the member's goroutines stop. Records returned by Next
// and not acknowledged go to other members at once (on a publisher that
// did not answer, after AckWait or once gossip reports this node gone).
// The member is stopped when Shutdown returns, whatever it returns: ctx's
// error if ctx ended before every publisher answered, ErrClosed if Close
// cut it short, else the publishers' errors joined (nil when all answered).
// A second Shutdown, or one after Close, waits for the member to stop (or
// ctx to end) and returns nil.
func (m *Member) Shutdown(ctx context.Context) error {
	links, first := m.closing()
	if !first {
		select {
		case <-m.stopped:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// A Close while the publishers answer ends the wait.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(m.ctx, cancel)()
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, ln := range links {
		wg.Go(func() {
			// A publisher that does not know the group holds no
			// lease of the member: nothing to release.
			if err := ln.leave(lctx); err != nil && !isUnknown(err) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("group: leave publisher %s: %w", ln.node, err))
				mu.Unlock()
			}
			ln.stop()
		})
	}
	wg.Wait()
	cut := m.ctx.Err() != nil
	m.stop()
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case cut:
		return ErrClosed
	}
	return errors.Join(errs...)
}

// Close stops the member at once, without telling the publishers, as a
// crash would: its leases run until AckWait or until gossip reports its
// node gone (Shutdown releases them at once). A Shutdown under way stops
// waiting for the publishers. Close returns after every goroutine of the
// member has exited; it is idempotent and returns nil.
func (m *Member) Close() error {
	links, first := m.closing()
	m.cancel()
	if !first {
		<-m.stopped
		return nil
	}
	for _, ln := range links {
		ln.stop()
	}
	m.stop()
	return nil
}

// closing marks the member closed and takes its links; first says the
// call is the first to do so, the one that must stop the member.
func (m *Member) closing() (links map[string]*link, first bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, false
	}
	m.closed = true
	links = m.links
	m.links = nil
	return links, true
}

// stop stops the member's own goroutines, once its links are stopped.
func (m *Member) stop() {
	m.cancel()
	m.wg.Wait()
	close(m.stopped)
}
