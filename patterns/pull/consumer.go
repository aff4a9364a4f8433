package pull

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// OutOfRangePolicy says what a consumer does when its position fell below
// a publisher's retention.
type OutOfRangePolicy int

// Out-of-range policies.
const (
	// ResetToOldest moves to the oldest retained record, counts the reset
	// and logs a warning. It is the default.
	ResetToOldest OutOfRangePolicy = iota
	// StopPublisher stops pulling from that publisher and reports the
	// error through Err.
	StopPublisher
)

// StreamWatcher reports the publishers of a stream as they come and go.
// *discovery.Membership implements it.
type StreamWatcher interface {
	WatchStream(ctx context.Context, stream string) (<-chan discovery.Event, error)
}

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	// Stream to consume. Required.
	Stream string
	// Name of the consumer, for logs and metrics.
	Name string
	// Node names the node the consumer runs on. Name and Node are told
	// to publishers (from protocol version 4), which list their readers
	// by them (Server.Clients).
	Node string
	// Offsets keeps the committed positions, per publisher, across
	// restarts. Nil means positions are not persisted.
	Offsets *spool.OffsetStore
	// ResumePosition, if set, is asked first for a publisher's position,
	// with the log identity and epoch it was read in (Message.LogID and
	// Message.Epoch of the last record consumed); when it reports ok,
	// Resume, Offsets and Start are not consulted. Sinks that keep their
	// position with their data (for exactly-once output) use it.
	ResumePosition func(publisher string) (spool.Position, bool)
	// Resume is ResumePosition for sinks that keep only the next offset.
	// Such a position is served without the log identity and epoch check
	// (see "Log identity and epochs" in the package documentation), as
	// before the check existed.
	Resume func(publisher string) (next uint64, ok bool)
	// Start applies to publishers without a committed position. Default
	// spool.Earliest().
	Start spool.Start
	// Discovery finds the publishers of Stream. Either Discovery or
	// Publishers (or both) must be set.
	Discovery StreamWatcher
	// Publishers maps publisher names to spool server endpoints, for use
	// without discovery.
	Publishers map[string]string
	// MaxBytes asks for at most this many bytes per fetch. Default 1 MiB.
	MaxBytes int
	// MaxBatchBytes caps the decompressed size of one fetched batch; it
	// must be at least the publishers' spool MaxBatchBytes. Default 8 MiB.
	MaxBatchBytes int
	// MaxWait is how long a fetch at the tail waits at the publisher.
	// Default 2s.
	MaxWait time.Duration
	// RequestTimeout is how long a fetch may take beyond MaxWait before it
	// is sent again. Default 3s.
	RequestTimeout time.Duration
	// CommitInterval is how often acknowledged positions are committed to
	// Offsets. Default 1s. Negative disables periodic commits (call Commit).
	CommitInterval time.Duration
	// Buffer is how many fetched batches may wait for Next, across all
	// publishers. Default 8. It bounds the consumer's memory to about
	// Buffer*MaxBytes (plus decompression).
	Buffer int
	// UnackedWarn is how long a record may stay delivered and not
	// acknowledged before a warning is logged, once per such record: it
	// holds its publisher's committed position back. Warnings are logged
	// only for a consumer with Offsets; PublisherStats.OldestUnacked
	// reports the age in any case. Default 1 minute; negative disables
	// the warning.
	UnackedWarn time.Duration
	// OnOutOfRange is the policy when a position fell below retention.
	OnOutOfRange OutOfRangePolicy
	// Socket configures the DEALER sockets (PLAIN credentials, heartbeats).
	Socket socket.Config
	// Logger receives the consumer's logs; nil discards them.
	Logger *slog.Logger
	// OnClose, if set, is called once by Close after the consumer stopped.
	OnClose func()
}

// Message is one record delivered by a Consumer. The caller owns it.
type Message struct {
	Publisher string
	Stream    string
	Offset    uint64
	ID        uuid.UUID
	Time      time.Time
	Headers   []spool.Header
	Value     []byte
	// Reset marks the first record after the consumer's position on this
	// publisher was moved: it was out of range (below retention, or beyond
	// the end of the log), the publisher now serves another log
	// (PublisherStats.OtherLogs), or the log lost records the consumer
	// had read and their offsets now name new records
	// (PublisherStats.Diverged). Offsets of the publisher may go backwards
	// at a Reset.
	Reset bool
	// LogID and Epoch are the identity of the publisher's log and the
	// epoch the record belongs to (the zero UUID and 0 from a publisher
	// that speaks protocol version 1). A sink that keeps its own position
	// stores them with the next offset and hands them back through
	// ConsumerConfig.ResumePosition.
	LogID uuid.UUID
	Epoch uint32

	gen uint64 // the publisher position generation the record belongs to
}

// PublisherStats are a consumer's counters for one publisher. In JSON
// (a node's /status) its fields are snake_case, durations in nanoseconds
// under names ending in _ns.
type PublisherStats struct {
	Publisher string `json:"publisher"`
	Endpoint  string `json:"endpoint"`
	Identity  string `json:"identity,omitempty"` // the publisher node's gossiped identity; "" if unknown
	Connected bool   `json:"connected"`          // a fetcher is running for it
	Delivered uint64 `json:"delivered"`          // records Next returned
	// Fetched counts the records fetched and queued for Next (Buffer
	// batches at most are waiting); records dropped by a stopping fetcher
	// are not counted.
	Fetched    uint64        `json:"fetched"`
	Acked      uint64        `json:"acked"`       // next offset after the contiguous acknowledged prefix
	Committed  uint64        `json:"committed"`   // next offset as last committed to the offset store; 2^64-1 before the first commit
	Position   uint64        `json:"position"`    // next offset to fetch
	High       uint64        `json:"high"`        // the publisher's next offset at the last reply
	LagRecords uint64        `json:"lag_records"` // High - Position
	LagTime    time.Duration `json:"lag_time_ns"` // age of the newest delivered record when lagging
	Resets     uint64        `json:"resets"`      // moves of the position that mark a record Reset: out of range, another log, diverged
	Errors     uint64        `json:"errors"`      // failed or timed-out fetches
	// OldestUnacked is how long ago the oldest record handed to Next and
	// not acknowledged (the one at Acked) was handed out; 0 when every
	// record handed out is acknowledged. A record never acknowledged holds
	// Committed back for good. StuckRecords counts the records that were
	// out longer than ConsumerConfig.UnackedWarn (each warned once).
	OldestUnacked time.Duration `json:"oldest_unacked_ns"`
	StuckRecords  uint64        `json:"stuck_records"`
	// Reconnects counts the connections to the publisher re-established
	// after one was lost; each sends the request in flight again at once.
	Reconnects uint64 `json:"reconnects"`
	// ConnError says why the last attempt to connect to the publisher
	// failed (a refused handshake, no CURVE key for it, ...), "" once a
	// connection is established: a publisher never connected to says why
	// here.
	ConnError string `json:"conn_error,omitempty"`
	// GapsSkipped counts the gaps in the publisher's log the consumer
	// crossed: offsets the publisher says do not exist (spool repair
	// removed them).
	GapsSkipped uint64 `json:"gaps_skipped"`
	// RecordsSkipped counts the offsets passed over without a record: in
	// those gaps, and below the oldest retained record at an out-of-range
	// reset.
	RecordsSkipped uint64 `json:"records_skipped"`
	// LogID is the identity of the publisher's log the position is in
	// (the zero UUID while unknown, or from a version 1 publisher), and
	// Epoch the epoch of the record before Position.
	LogID uuid.UUID `json:"log_id"`
	Epoch uint32    `json:"epoch"`
	// OtherLogs counts the times the publisher served another log than
	// the position was read from (another spool under the same name, or a
	// log that lost its identity): the consumer started over by its Start
	// policy instead of continuing those offsets.
	OtherLogs uint64 `json:"other_logs"`
	// Diverged counts the times the publisher's log had lost records this
	// consumer had read (a tail cut by recovery or spool repair), and
	// RecordsReplaced the offsets read again for that: new records now
	// hold them.
	Diverged        uint64 `json:"diverged"`
	RecordsReplaced uint64 `json:"records_replaced"`
	// Stopped is the error that stopped the publisher's last fetcher for
	// good (see FetchError), or nil. A later fetcher (a discovery update)
	// clears it. StoppedReason is its text, for JSON.
	Stopped       error  `json:"-"`
	StoppedReason string `json:"stopped,omitempty"`
}

// Consumer pulls a stream from every publisher of it, delivering each
// publisher's records in order. Delivery is at least once: positions are
// committed only once acknowledged, and a restarted consumer resumes after
// its last commit.
//
// Gaps and damage. Offsets that no longer exist in a publisher's log are
// crossed: where spool repair removed damaged batches, the publisher says
// so (StatusGap) and the consumer goes on after the gap, counts the gap in
// PublisherStats.GapsSkipped and RecordsSkipped and logs a warning with
// the publisher and the range; below the oldest retained record, the
// OnOutOfRange policy applies. Data that exists but cannot be read
// (unrepaired damage) is never skipped: the consumer delivers the records
// before it, then stops pulling from that publisher with a *FetchError
// wrapping ErrDamaged.
//
// A stopped publisher never goes unnoticed. Whenever a publisher's
// fetcher stops for good (damage, out of range under StopPublisher, too
// many bad replies, a socket that cannot be created), Next returns its
// *FetchError exactly once, in the place of the publisher's next record:
// after every record fetched from it before it stopped (unless discovery
// removed the publisher or Close was called first). The other
// publishers are not affected: their records keep coming, before and after
// the error, so a caller that wants to go on with the healthy publishers
// calls Next again, and one that wants to stop (a CLI exiting non-zero)
// returns the error. (With no other publisher to deliver from, the next
// call blocks as at any quiet time.) Err keeps returning the first such
// error, and
// PublisherStats.Stopped says which publisher stopped. A stopped publisher
// is pulled again only if discovery reports it again (a restart, an
// update).
//
// A Consumer is safe for concurrent use. Next blocks until a record (or a
// stopped publisher's error) is available; Close commits what was
// acknowledged and returns after every goroutine has exited.
type Consumer struct {
	cfg ConsumerConfig
	log *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	batches chan *delivery

	nextMu sync.Mutex
	cur    *delivery

	mu       sync.Mutex
	pubs     map[string]*pubState
	fetchers map[string]*fetcher
	err      error
	closed   bool
	commitMu sync.Mutex
}

// delivery is what a fetcher hands to Next: records, or the error that
// stopped it.
type delivery struct {
	msgs []Message
	i    int
	err  *FetchError
	ps   *pubState // the publisher of msgs
}

// pubState is what a consumer knows of one publisher; it outlives fetchers.
type pubState struct {
	name       string
	endpoint   string
	started    bool
	fetchPos   uint64    // next offset to fetch
	acks       ackWindow // acknowledged offsets; its floor is what Commit writes
	commit     uint64
	high       uint64
	lastTime   time.Time
	fetched    uint64        // records queued for Next
	returned   atomic.Uint64 // records Next returned
	resets     uint64
	errors     uint64
	reconnects uint64
	running    bool
	gen        uint64 // incremented by every reset; acks of older generations are ignored (but see keepGen)
	gaps       uint64 // gaps crossed
	skipped    uint64 // offsets skipped in gaps and at resets
	stopped    *FetchError
	connErr    string // why the last connection attempt failed; "" once connected

	// Acks of generation keepGen for offsets below keepBelow still count:
	// a reset that moved the position above the acknowledged floor
	// (diverged below what was fetched, out of range above it) keeps the
	// floor under the records delivered before it, so that a commit never
	// passes a record the caller has not acknowledged.
	keepGen, keepBelow uint64

	// Records handed to Next and not acknowledged (see unacked.go).
	handMarks    []handMark // first hand-out of each batch, by offset
	handGen      uint64     // the generation of the marks
	handEnd      uint64     // the offset after the last record handed out
	warned       bool       // a warning was logged for warnedOffset of warnedGen
	warnedOffset uint64
	warnedGen    uint64
	stuck        uint64 // records warned of

	identity string // the node's gossiped identity, as last seen

	// The log the position is in (see identity.go).
	logID     uuid.UUID   // the zero UUID while unknown
	logEpoch  uint32      // epoch sent with fetches: of the record before fetchPos; NoEpoch unchecked
	baseEpoch uint32      // epoch of the position before the first mark
	marks     []epochMark // epochs of delivered records above the base, for commits
	posKnown  bool        // the position's log and epoch are known: it may be committed
	otherLogs uint64
	diverged  uint64
	replaced  uint64
}

// NewConsumer starts a consumer. It returns at once; fetching happens in
// the background.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if cfg.Stream == "" || len(cfg.Stream) > MaxStreamName {
		return nil, fmt.Errorf("pull: consumer needs a stream name of 1..%d bytes", MaxStreamName)
	}
	if cfg.Discovery == nil && len(cfg.Publishers) == 0 {
		return nil, errors.New("pull: consumer needs Discovery or Publishers")
	}
	if cfg.Start.Kind > spool.StartTime {
		return nil, fmt.Errorf("pull: unknown start kind %d", cfg.Start.Kind)
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 1 << 20
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 2 * time.Second
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = 8 << 20
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 3 * time.Second
	}
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = time.Second
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 8
	}
	if cfg.UnackedWarn == 0 {
		cfg.UnackedWarn = time.Minute
	}
	pubs := make(map[string]string, len(cfg.Publishers))
	for k, v := range cfg.Publishers {
		pubs[k] = v
	}
	cfg.Publishers = pubs
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	c := &Consumer{
		cfg:      cfg,
		log:      lg.With("component", "consumer", "stream", cfg.Stream, "consumer", cfg.Name),
		batches:  make(chan *delivery, cfg.Buffer),
		pubs:     make(map[string]*pubState),
		fetchers: make(map[string]*fetcher),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	for name, ep := range cfg.Publishers {
		c.startFetcher(name, ep, false, "")
	}
	if cfg.Discovery != nil {
		events, err := cfg.Discovery.WatchStream(c.ctx, cfg.Stream)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("pull: watch publishers of %q: %w", cfg.Stream, err)
		}
		c.wg.Add(1)
		go c.discoverLoop(events)
	}
	if cfg.CommitInterval > 0 && cfg.Offsets != nil {
		c.wg.Add(1)
		go c.commitLoop()
	}
	if cfg.UnackedWarn > 0 && cfg.Offsets != nil {
		c.wg.Add(1)
		go c.watchUnacked()
	}
	return c, nil
}

// Next returns the next record from any publisher. It blocks until one is
// available or ctx ends. Records of one publisher come in offset order.
// When a publisher's fetcher stopped for good, Next returns its
// *FetchError once, after that publisher's records fetched before it
// stopped; later calls go on with the other publishers (see Consumer).
// After Close it returns ErrClosed.
func (c *Consumer) Next(ctx context.Context) (Message, error) {
	c.nextMu.Lock()
	defer c.nextMu.Unlock()
	for c.cur == nil || c.cur.i >= len(c.cur.msgs) {
		select {
		case d := <-c.batches:
			if d.err != nil {
				return Message{}, d.err
			}
			c.cur = d
			if d.ps != nil && len(d.msgs) > 0 {
				first, last := d.msgs[0], d.msgs[len(d.msgs)-1]
				c.mu.Lock()
				d.ps.handedLocked(first.gen, first.Offset, last.Offset+1, time.Now())
				c.mu.Unlock()
			}
		case <-ctx.Done():
			return Message{}, ctx.Err()
		case <-c.ctx.Done():
			return Message{}, ErrClosed
		}
	}
	m := c.cur.msgs[c.cur.i]
	c.cur.msgs[c.cur.i] = Message{}
	c.cur.i++
	if c.cur.ps != nil {
		c.cur.ps.returned.Add(1)
	}
	return m, nil
}

// Stats returns per-publisher counters, sorted by publisher name.
func (c *Consumer) Stats() []PublisherStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]PublisherStats, 0, len(c.pubs))
	now := time.Now()
	for _, ps := range c.pubs {
		st := PublisherStats{
			Publisher: ps.name, Endpoint: ps.endpoint, Identity: ps.identity, Connected: ps.running,
			Delivered: ps.returned.Load(), Fetched: ps.fetched, Acked: ps.acks.floor(), Committed: ps.commit,
			Position: ps.fetchPos, High: ps.high, Resets: ps.resets, Errors: ps.errors, Reconnects: ps.reconnects,
			GapsSkipped: ps.gaps, RecordsSkipped: ps.skipped,
			LogID: ps.logID, OtherLogs: ps.otherLogs, Diverged: ps.diverged, RecordsReplaced: ps.replaced,
			ConnError: ps.connErr,
		}
		if ps.logEpoch != NoEpoch {
			st.Epoch = ps.logEpoch
		}
		if _, age, ok := ps.oldestUnackedLocked(now); ok {
			st.OldestUnacked = age
		}
		st.StuckRecords = ps.stuck
		if ps.stopped != nil {
			st.Stopped, st.StoppedReason = ps.stopped, ps.stopped.Error()
		}
		if ps.high > ps.fetchPos {
			st.LagRecords = ps.high - ps.fetchPos
			if !ps.lastTime.IsZero() {
				st.LagTime = time.Since(ps.lastTime)
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Publisher < out[j].Publisher })
	return out
}

// Stream returns the consumed stream's name.
func (c *Consumer) Stream() string { return c.cfg.Stream }

// Err returns the first error that stopped a publisher's fetcher for good
// (a *FetchError), or nil. Once set, it does not change.
func (c *Consumer) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close stops fetching, commits what was acknowledged and returns after
// every goroutine has exited. Records fetched but not yet delivered are
// dropped; they are fetched again by the next consumer of the same offsets.
// Close is idempotent.
func (c *Consumer) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	err := c.Commit()
	if c.cfg.OnClose != nil {
		c.cfg.OnClose()
	}
	return err
}

func (c *Consumer) discoverLoop(events <-chan discovery.Event) {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			name := ev.Instance.Node
			switch ev.Type {
			case discovery.Added, discovery.Updated:
				if len(ev.Instance.Service.Endpoints) == 0 {
					continue
				}
				c.startFetcher(name, ev.Instance.Service.Endpoints[0], ev.Instance.Unlisted, ev.Instance.Identity)
			case discovery.Removed:
				c.log.Info("publisher gone", "peer", name, "reason", ev.Reason.String())
				c.stopFetcher(name)
			}
		}
	}
}
