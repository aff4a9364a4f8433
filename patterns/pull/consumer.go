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

// StartKind says where a consumer starts on a publisher it has no committed
// offset for.
type StartKind int

// Start kinds.
const (
	StartEarliest StartKind = iota // the oldest retained record
	StartLatest                    // only records appended from now on
	StartOffset                    // a given offset
	StartTime                      // the first record at or after a time
)

// Start is a start position. The zero value is Earliest.
type Start struct {
	Kind   StartKind
	Offset uint64
	Time   time.Time
}

// Earliest starts at the oldest retained record.
func Earliest() Start { return Start{Kind: StartEarliest} }

// Latest starts after the newest record.
func Latest() Start { return Start{Kind: StartLatest} }

// AtOffset starts at offset o.
func AtOffset(o uint64) Start { return Start{Kind: StartOffset, Offset: o} }

// AtTime starts at the first record at or after t.
func AtTime(t time.Time) Start { return Start{Kind: StartTime, Time: t} }

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
	// Offsets keeps the committed positions, per publisher, across
	// restarts. Nil means positions are not persisted.
	Offsets *spool.OffsetStore
	// Resume, if set, is asked first for a publisher's position; when it
	// reports ok, Offsets and Start are not consulted. Sinks that keep their
	// position with their data (for exactly-once output) use it.
	Resume func(publisher string) (next uint64, ok bool)
	// Start applies to publishers without a committed position.
	Start Start
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
	// publisher was moved because it was out of range (below retention,
	// or beyond the end of a publisher log that was replaced). Offsets of
	// the publisher may go backwards at a Reset.
	Reset bool

	epoch uint64 // the publisher position epoch the record belongs to
}

// PublisherStats are a consumer's counters for one publisher.
type PublisherStats struct {
	Publisher  string
	Endpoint   string
	Connected  bool          // a fetcher is running for it
	Delivered  uint64        // records handed to Next
	Acked      uint64        // next offset after the contiguous acknowledged prefix
	Committed  uint64        // next offset as last committed to the offset store
	Position   uint64        // next offset to fetch
	High       uint64        // the publisher's next offset at the last reply
	LagRecords uint64        // High - Position
	LagTime    time.Duration // age of the newest delivered record when lagging
	Resets     uint64        // out-of-range resets
	Errors     uint64        // failed or timed-out fetches
}

// Consumer pulls a stream from every publisher of it, delivering each
// publisher's records in order. Delivery is at least once: positions are
// committed only once acknowledged, and a restarted consumer resumes after
// its last commit.
//
// A Consumer is safe for concurrent use. Next blocks until a record is
// available; Close commits what was acknowledged and returns after every
// goroutine has exited.
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

type delivery struct {
	msgs []Message
	i    int
}

// pubState is what a consumer knows of one publisher; it outlives fetchers.
type pubState struct {
	name     string
	endpoint string
	started  bool
	fetchPos uint64 // next offset to fetch
	ackNext  uint64 // next offset after the contiguous acked prefix
	ooo      map[uint64]struct{}
	commit   uint64
	high     uint64
	lastTime time.Time
	deliv    uint64
	resets   uint64
	errors   uint64
	running  bool
	epoch    uint64 // incremented by every reset; acks of older epochs are ignored
	badData  int    // consecutive undecodable replies
}

type fetcher struct {
	ps       *pubState
	endpoint string
	cancel   context.CancelFunc
	done     chan struct{}
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
		log:      lg.With("component", "consumer", "topic", cfg.Stream, "consumer", cfg.Name),
		batches:  make(chan *delivery, cfg.Buffer),
		pubs:     make(map[string]*pubState),
		fetchers: make(map[string]*fetcher),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	for name, ep := range cfg.Publishers {
		c.startFetcher(name, ep)
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
	return c, nil
}

// Next returns the next record from any publisher. It blocks until one is
// available or ctx ends. Records of one publisher come in offset order.
func (c *Consumer) Next(ctx context.Context) (Message, error) {
	c.nextMu.Lock()
	defer c.nextMu.Unlock()
	for c.cur == nil || c.cur.i >= len(c.cur.msgs) {
		select {
		case d := <-c.batches:
			c.cur = d
		case <-ctx.Done():
			return Message{}, ctx.Err()
		case <-c.ctx.Done():
			return Message{}, ErrClosed
		}
	}
	m := c.cur.msgs[c.cur.i]
	c.cur.msgs[c.cur.i] = Message{}
	c.cur.i++
	return m, nil
}

// Ack acknowledges m: its position may be committed once every earlier
// record of the same publisher is acknowledged too.
func (c *Consumer) Ack(m Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := c.pubs[m.Publisher]
	if ps == nil || m.epoch != ps.epoch || m.Offset < ps.ackNext {
		return // unknown, from before a reset, or already acknowledged
	}
	if m.Offset == ps.ackNext {
		ps.ackNext++
		for len(ps.ooo) > 0 {
			if _, ok := ps.ooo[ps.ackNext]; !ok {
				break
			}
			delete(ps.ooo, ps.ackNext)
			ps.ackNext++
		}
		return
	}
	if ps.ooo == nil {
		ps.ooo = make(map[uint64]struct{})
	}
	ps.ooo[m.Offset] = struct{}{}
}

// Commit writes the acknowledged positions to the offset store. It is a
// no-op without one.
func (c *Consumer) Commit() error {
	if c.cfg.Offsets == nil {
		return nil
	}
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	type todo struct {
		name string
		next uint64
	}
	var work []todo
	c.mu.Lock()
	for name, ps := range c.pubs {
		if ps.ackNext != ps.commit {
			work = append(work, todo{name, ps.ackNext})
		}
	}
	c.mu.Unlock()
	var errs []error
	for _, w := range work {
		if err := c.cfg.Offsets.Commit(w.name, c.cfg.Stream, w.next); err != nil {
			errs = append(errs, fmt.Errorf("pull: commit %s/%s at %d: %w", w.name, c.cfg.Stream, w.next, err))
			continue
		}
		c.mu.Lock()
		if ps := c.pubs[w.name]; ps != nil {
			ps.commit = w.next
		}
		c.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Stats returns per-publisher counters, sorted by publisher name.
func (c *Consumer) Stats() []PublisherStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]PublisherStats, 0, len(c.pubs))
	for _, ps := range c.pubs {
		st := PublisherStats{
			Publisher: ps.name, Endpoint: ps.endpoint, Connected: ps.running,
			Delivered: ps.deliv, Acked: ps.ackNext, Committed: ps.commit,
			Position: ps.fetchPos, High: ps.high, Resets: ps.resets, Errors: ps.errors,
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

// Err returns the first error that stopped a publisher's fetcher under the
// StopPublisher policy, or nil.
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
				c.startFetcher(name, ev.Instance.Service.Endpoints[0])
			case discovery.Removed:
				c.log.Info("publisher gone", "peer", name, "reason", ev.Reason.String())
				c.stopFetcher(name)
			}
		}
	}
}

func (c *Consumer) commitLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			if err := c.Commit(); err != nil {
				c.log.Error("commit offsets", "err", err)
			}
		}
	}
}

// startFetcher starts (or restarts, on a new endpoint) the fetcher of a
// publisher.
func (c *Consumer) startFetcher(name, endpoint string) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if f := c.fetchers[name]; f != nil {
		if f.endpoint == endpoint {
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.stopFetcher(name)
		c.mu.Lock()
	}
	ps := c.pubs[name]
	if ps == nil {
		ps = &pubState{name: name}
		c.pubs[name] = ps
	}
	ps.endpoint = endpoint
	ps.running = true
	ctx, cancel := context.WithCancel(c.ctx)
	f := &fetcher{ps: ps, endpoint: endpoint, cancel: cancel, done: make(chan struct{})}
	c.fetchers[name] = f
	c.wg.Add(1)
	c.mu.Unlock()
	c.log.Info("pulling from publisher", "peer", name, "endpoint", endpoint)
	go c.fetch(ctx, f)
}

func (c *Consumer) stopFetcher(name string) {
	c.mu.Lock()
	f := c.fetchers[name]
	delete(c.fetchers, name)
	c.mu.Unlock()
	if f == nil {
		return
	}
	f.cancel()
	<-f.done
}

var reqIDs atomic.Uint32

// fetch is the loop of one publisher's fetcher: one request in flight
// while the previous reply's records are being delivered.
func (c *Consumer) fetch(ctx context.Context, f *fetcher) {
	defer c.wg.Done()
	defer close(f.done)
	defer func() {
		c.mu.Lock()
		f.ps.running = false
		if c.fetchers[f.ps.name] == f {
			delete(c.fetchers, f.ps.name) // a later discovery event starts a new one
		}
		c.mu.Unlock()
	}()
	lg := c.log.With("peer", f.ps.name, "endpoint", f.endpoint)
	scfg := c.cfg.Socket
	if scfg.Logger == nil {
		scfg.Logger = c.cfg.Logger
	}
	if scfg.ReconnectIntervalMax == 0 {
		scfg.ReconnectIntervalMax = 2 * time.Second
	}
	sock, err := socket.New(socket.Dealer, scfg)
	if err != nil {
		lg.Error("create socket", "err", err)
		return
	}
	defer sock.Close()
	if err := sock.Connect(f.endpoint); err != nil {
		lg.Error("connect", "err", err)
		return
	}
	pc := &pullConn{c: c, sock: sock, lg: lg}

	pos, err := c.startPosition(ctx, pc, f.ps)
	if err != nil {
		return // ctx ended
	}
	// One fetch is always in flight: the next is sent before the records of
	// the current reply are delivered.
	resetPending := false
	id := pc.sendFetch(ctx, pos)
	for {
		rep, err := pc.await(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.countError(f.ps)
			id = pc.sendFetch(ctx, pos)
			continue
		}
		switch rep.Status {
		case StatusOK:
		case StatusOutOfRange:
			if c.cfg.OnOutOfRange == StopPublisher {
				lg.Error("offset out of range", "offset", pos, "oldest", rep.Oldest, "next", rep.High)
				c.stopWith(fmt.Errorf("pull: %s/%s: offset %d out of range (oldest %d, next %d): %s", f.ps.name, c.cfg.Stream, pos, rep.Oldest, rep.High, rep.Data))
				return
			}
			lg.Warn("offset out of range, moving to the oldest", "offset", pos, "oldest", rep.Oldest, "next", rep.High)
			c.mu.Lock()
			f.ps.resets++
			f.ps.epoch++
			f.ps.ackNext, f.ps.ooo, f.ps.fetchPos = rep.Oldest, nil, rep.Oldest
			c.mu.Unlock()
			pos = rep.Oldest
			resetPending = true
			id = pc.sendFetch(ctx, pos)
			continue
		default:
			c.countError(f.ps)
			lg.Warn("fetch refused", "offset", pos, "status", rep.Status.String(), "err", string(rep.Data))
			if !sleepCtx(ctx, time.Second) {
				return
			}
			id = pc.sendFetch(ctx, pos)
			continue
		}
		if len(rep.Data) == 0 || rep.Next <= pos {
			c.mu.Lock()
			f.ps.high = rep.High
			c.mu.Unlock()
			id = pc.sendFetch(ctx, pos)
			continue
		}
		c.mu.Lock()
		epoch := f.ps.epoch
		c.mu.Unlock()
		msgs, err := decodeReply(rep, pos, c.cfg.MaxBatchBytes, f.ps.name, c.cfg.Stream, epoch)
		if err != nil {
			c.countError(f.ps)
			f.ps.badData++
			lg.Error("bad fetched data", "offset", pos, "err", err)
			if f.ps.badData >= maxBadReplies {
				c.stopWith(fmt.Errorf("pull: %s/%s: %d bad replies in a row at offset %d, last: %w", f.ps.name, c.cfg.Stream, f.ps.badData, pos, err))
				return
			}
			if !sleepCtx(ctx, 200*time.Millisecond) {
				return
			}
			id = pc.sendFetch(ctx, pos)
			continue
		}
		f.ps.badData = 0
		if resetPending && len(msgs) > 0 {
			msgs[0].Reset = true
			resetPending = false
		}
		pos = rep.Next
		id = pc.sendFetch(ctx, pos)
		if len(msgs) == 0 {
			continue
		}
		c.mu.Lock()
		f.ps.fetchPos = pos
		f.ps.high = rep.High
		f.ps.deliv += uint64(len(msgs))
		f.ps.lastTime = msgs[len(msgs)-1].Time
		c.mu.Unlock()
		select {
		case c.batches <- &delivery{msgs: msgs}:
		case <-ctx.Done():
			// Not delivered: fetch them again next time.
			c.mu.Lock()
			f.ps.fetchPos = msgs[0].Offset
			f.ps.deliv -= uint64(len(msgs))
			c.mu.Unlock()
			return
		}
	}
}

// startPosition decides where to start on a publisher: where this consumer
// left off in this process, its committed offset, or the Start policy.
func (c *Consumer) startPosition(ctx context.Context, pc *pullConn, ps *pubState) (uint64, error) {
	c.mu.Lock()
	if ps.started {
		pos := ps.fetchPos
		c.mu.Unlock()
		return pos, nil
	}
	c.mu.Unlock()
	var pos uint64
	committed := false
	if c.cfg.Resume != nil {
		pos, committed = c.cfg.Resume(ps.name)
	}
	if !committed && c.cfg.Offsets != nil {
		pos, committed = c.cfg.Offsets.Get(ps.name, c.cfg.Stream)
	}
	if !committed {
		switch c.cfg.Start.Kind {
		case StartOffset:
			pos = c.cfg.Start.Offset
		default:
			op, arg := OpMeta, uint64(0)
			if c.cfg.Start.Kind == StartTime {
				op, arg = OpSeekTime, uint64(c.cfg.Start.Time.UnixNano())
			}
			for {
				id := pc.send(ctx, op, arg)
				rep, err := pc.await(ctx, id)
				if err == nil && rep.Status == StatusOK {
					pos = rep.Next // the next offset (latest) or the time's offset
					if c.cfg.Start.Kind == StartEarliest {
						pos = rep.Oldest
					}
					break
				}
				if ctx.Err() != nil {
					return 0, ctx.Err()
				}
				c.countError(ps)
				if err == nil && !sleepCtx(ctx, time.Second) {
					return 0, ctx.Err()
				}
			}
		}
	}
	c.mu.Lock()
	ps.started = true
	ps.fetchPos, ps.ackNext, ps.commit, ps.ooo = pos, pos, pos, nil
	if !committed {
		ps.commit = ^uint64(0) // nothing committed yet: commit the start
	}
	c.mu.Unlock()
	return pos, nil
}

func (c *Consumer) countError(ps *pubState) {
	c.mu.Lock()
	ps.errors++
	c.mu.Unlock()
}

// pullConn is one fetcher's DEALER socket and request numbering.
type pullConn struct {
	c    *Consumer
	sock *socket.Socket
	lg   *slog.Logger
}

func (pc *pullConn) sendFetch(ctx context.Context, pos uint64) uint32 {
	return pc.send(ctx, OpFetch, pos)
}

// send sends a request and returns its id. A failed send is left to the
// reply timeout, which sends again.
func (pc *pullConn) send(ctx context.Context, op Op, arg uint64) uint32 {
	cfg := &pc.c.cfg
	r := Request{Op: op, ID: reqIDs.Add(1), Offset: arg, MaxBytes: uint32(cfg.MaxBytes), Stream: cfg.Stream}
	if op == OpFetch {
		r.MaxWaitMillis = uint32(cfg.MaxWait / time.Millisecond)
	}
	sctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	err := pc.sock.Send(sctx, socket.Msg{Frames: EncodeRequest(&r)})
	cancel()
	if err != nil && ctx.Err() == nil && pc.lg.Enabled(ctx, slog.LevelDebug) {
		pc.lg.Debug("send fetch", "err", err)
	}
	return r.ID
}

// await waits for the reply to request id, discarding stale replies.
func (pc *pullConn) await(ctx context.Context, id uint32) (Reply, error) {
	cfg := &pc.c.cfg
	rctx, cancel := context.WithTimeout(ctx, cfg.MaxWait+cfg.RequestTimeout)
	defer cancel()
	for {
		m, err := pc.sock.Recv(rctx)
		if err != nil {
			return Reply{}, err
		}
		rep, err := DecodeReply(m.Frames)
		if err != nil {
			pc.lg.Warn("malformed reply", "err", err)
			continue
		}
		if rep.ID == id {
			return rep, nil
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// maxBadReplies is how many undecodable replies in a row stop a publisher's
// fetcher: damage on the publisher's disk is reported, never skipped.
const maxBadReplies = 5

// errBadReply reports a reply whose records do not match what it claims.
var errBadReply = errors.New("pull: reply does not match its header")

// decodeReply decodes the records of a fetch reply from pos on and checks
// them against the reply's header: offsets dense from pos up to rep.Next.
func decodeReply(rep Reply, pos uint64, maxBatch int, publisher, stream string, epoch uint64) ([]Message, error) {
	if rep.Next < pos || rep.Next > rep.High {
		return nil, fmt.Errorf("%w: next %d for a fetch at %d with high %d", errBadReply, rep.Next, pos, rep.High)
	}
	// Every stored record takes more than 16 bytes: bound the allocation by
	// what the data can hold, not by what the header claims.
	msgs := make([]Message, 0, min(rep.Next-pos, uint64(len(rep.Data))/16+1))
	want := pos
	err := spool.DecodeBatches(rep.Data, pos, maxBatch, func(r spool.Record) error {
		if r.Offset != want || r.Offset >= rep.Next {
			return fmt.Errorf("%w: record at offset %d, expected %d (next %d)", errBadReply, r.Offset, want, rep.Next)
		}
		want++
		msgs = append(msgs, Message{
			Publisher: publisher, Stream: stream, Offset: r.Offset,
			ID: r.ID, Time: r.Time, Headers: r.Headers, Value: r.Value, epoch: epoch,
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if want != rep.Next {
		return nil, fmt.Errorf("%w: records end at %d, header says %d", errBadReply, want, rep.Next)
	}
	return msgs, nil
}

// stopWith records the first error that stopped a fetcher.
func (c *Consumer) stopWith(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}
