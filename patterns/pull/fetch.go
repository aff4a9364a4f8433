package pull

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/internal/ctxutil"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

type fetcher struct {
	ps       *pubState
	endpoint string
	// unlisted: discovery only knows the publisher may serve the stream
	// (its advertisement was cut to fit gossip), so "unknown stream" is an
	// expected answer, not a fault.
	unlisted bool
	identity string // the publisher node's gossiped identity ("" unknown)
	cancel   context.CancelFunc
	done     chan struct{}
}

// unlistedRetry is how often a publisher whose advertisement did not list
// the stream is asked again after it answered "unknown stream".
const unlistedRetry = 30 * time.Second

// startFetcher starts (or restarts, on a new endpoint or identity) the
// fetcher of a publisher. unlisted says discovery did not list the stream
// for it (see discovery.Instance.Unlisted); identity is the node's
// gossiped identity (discovery.Instance.Identity), "" when unknown.
func (c *Consumer) startFetcher(name, endpoint string, unlisted bool, identity string) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if f := c.fetchers[name]; f != nil {
		if f.endpoint == endpoint && f.unlisted == unlisted && f.identity == identity {
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
	if ps.identity != "" && identity != "" && ps.identity != identity {
		// Another process (another data directory) now runs under the
		// name: its logs have other identities, which the first fetch
		// finds (StatusOtherLog).
		c.log.Warn("publisher name now held by another node identity", "peer", name, "endpoint", endpoint, "identity", identity, "was", ps.identity)
	}
	if identity != "" {
		ps.identity = identity
	}
	ps.endpoint = endpoint
	ps.running = true
	ps.stopped = nil
	ctx, cancel := context.WithCancel(c.ctx)
	f := &fetcher{ps: ps, endpoint: endpoint, unlisted: unlisted, identity: identity, cancel: cancel, done: make(chan struct{})}
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
		c.stop(ctx, lg, f.ps, c.position(f.ps), fmt.Errorf("pull: create socket: %w", err))
		return
	}
	pc := &pullConn{c: c, ps: f.ps, sock: sock, lg: lg, version: ProtocolVersion}
	watched := make(chan struct{})
	go pc.watchEvents(sock.Events(), watched)
	defer func() {
		sock.Close() // closes the event channel: the watcher ends
		<-watched
	}()
	if err := sock.Connect(f.endpoint); err != nil {
		c.stop(ctx, lg, f.ps, c.position(f.ps), fmt.Errorf("pull: connect to %s: %w", f.endpoint, err))
		return
	}

	pos, err := c.startPosition(ctx, pc, f.ps, f.unlisted)
	if err != nil {
		if ctx.Err() == nil {
			c.stop(ctx, lg, f.ps, c.position(f.ps), err)
		}
		return
	}
	// One fetch is always in flight while records are delivered: the next
	// is sent before the records of the current reply are handed over.
	// After a bad reply, the valid records it held are delivered first and
	// the fetch is sent again after a pause.
	resetPending := false
	badReplies := 0 // in a row
	id := pc.sendFetch(ctx, pos)
	for {
		rep, err := pc.await(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !errors.Is(err, errReconnected) {
				c.countError(f.ps)
			}
			id = pc.sendFetch(ctx, pos)
			continue
		}
		var msgs []Message
		var bad error // what is wrong with this reply
		switch rep.Status {
		case StatusOK:
			if !c.sameLog(f.ps, rep) {
				if pos, err = c.otherLog(ctx, pc, lg, f.ps, pos, rep, f.unlisted); err != nil {
					return
				}
				resetPending = true
				id = pc.sendFetch(ctx, pos)
				continue
			}
			if len(rep.Data) == 0 || rep.Next <= pos {
				c.mu.Lock()
				f.ps.high = rep.High
				f.ps.learnLocked(rep, pos, false)
				c.mu.Unlock()
				id = pc.sendFetch(ctx, pos)
				continue
			}
			c.mu.Lock()
			gen := f.ps.gen
			c.mu.Unlock()
			msgs, bad = decodeReply(rep, pos, c.cfg.MaxBatchBytes, f.ps.name, c.cfg.Stream, gen)
		case StatusGap:
			if rep.Next <= pos || rep.Next > rep.High {
				bad = fmt.Errorf("%w: gap up to %d for a fetch at %d with high %d", errBadReply, rep.Next, pos, rep.High)
				break
			}
			c.skipGap(lg, f.ps, pos, rep)
			pos = rep.Next
			id = pc.sendFetch(ctx, pos)
			continue
		case StatusOtherLog:
			if pos, err = c.otherLog(ctx, pc, lg, f.ps, pos, rep, f.unlisted); err != nil {
				return
			}
			resetPending = true
			id = pc.sendFetch(ctx, pos)
			continue
		case StatusDiverged:
			if rep.Next >= pos {
				bad = fmt.Errorf("%w: diverged at %d for a fetch at %d", errBadReply, rep.Next, pos)
				break
			}
			c.diverged(lg, f.ps, pos, rep)
			pos = rep.Next
			resetPending = true
			id = pc.sendFetch(ctx, pos)
			continue
		case StatusDamaged:
			c.stop(ctx, lg, f.ps, pos, fmt.Errorf("%w: %s", ErrDamaged, message(rep.Data)))
			return
		case StatusForbidden:
			c.stop(ctx, lg, f.ps, pos, forbidden(rep))
			return
		case StatusOutOfRange:
			if c.cfg.OnOutOfRange == StopPublisher {
				c.stop(ctx, lg, f.ps, pos, fmt.Errorf("%w (oldest %d, next %d): %s", ErrOutOfRange, rep.Oldest, rep.High, message(rep.Data)))
				return
			}
			c.resetToOldest(lg, f.ps, pos, rep)
			pos = rep.Oldest
			resetPending = true
			id = pc.sendFetch(ctx, pos)
			continue
		case StatusBadRequest:
			bad = fmt.Errorf("%w: the publisher refused the request: %s", errBadReply, message(rep.Data))
		default:
			wait := time.Second
			if f.unlisted && rep.Status == StatusUnknown {
				lg.Debug("unlisted publisher does not serve the stream", "offset", pos)
				wait = unlistedRetry
			} else {
				c.countError(f.ps)
				lg.Warn("fetch refused", "offset", pos, "status", rep.Status.String(), "err", message(rep.Data))
			}
			if !ctxutil.Sleep(ctx, wait) {
				return
			}
			id = pc.sendFetch(ctx, pos)
			continue
		}
		if len(msgs) > 0 {
			c.mu.Lock()
			f.ps.learnLocked(rep, msgs[0].Offset, true)
			c.mu.Unlock()
		}
		if bad == nil {
			badReplies = 0
			pos = rep.Next
			id = pc.sendFetch(ctx, pos)
		} else {
			badReplies++
			c.countError(f.ps)
			if n := len(msgs); n > 0 {
				pos = msgs[n-1].Offset + 1
			}
			lg.Warn("bad fetched data", "offset", pos, "err", bad)
		}
		if resetPending && len(msgs) > 0 {
			msgs[0].Reset = true
			resetPending = false
		}
		if len(msgs) > 0 && !c.deliver(ctx, f.ps, msgs, pos, rep.High) {
			return
		}
		if bad == nil {
			continue
		}
		if badReplies >= maxBadReplies {
			cause := ErrProtocol
			if errors.Is(bad, spool.ErrCorrupt) {
				cause = ErrDamaged
			}
			c.stop(ctx, lg, f.ps, pos, fmt.Errorf("%w: %d bad replies in a row, last: %w", cause, badReplies, bad))
			return
		}
		if !ctxutil.Sleep(ctx, 200*time.Millisecond) {
			return
		}
		id = pc.sendFetch(ctx, pos)
	}
}

// deliver hands msgs, which end before pos, to Next. It returns false if
// ctx ended first; the records are then fetched again by the next fetcher.
func (c *Consumer) deliver(ctx context.Context, ps *pubState, msgs []Message, pos, high uint64) bool {
	c.mu.Lock()
	ps.fetchPos = pos
	ps.high = high
	ps.fetched += uint64(len(msgs))
	ps.lastTime = msgs[len(msgs)-1].Time
	c.mu.Unlock()
	select {
	case c.batches <- &delivery{msgs: msgs, ps: ps}:
		return true
	case <-ctx.Done():
		c.mu.Lock()
		ps.fetchPos = msgs[0].Offset
		ps.fetched -= uint64(len(msgs))
		c.mu.Unlock()
		return false
	}
}

// skipGap crosses a gap the publisher reported: the offsets from pos up to
// rep.Next do not exist in its log.
func (c *Consumer) skipGap(lg *slog.Logger, ps *pubState, pos uint64, rep Reply) {
	n := rep.Next - pos
	lg.Warn("records missing from the publisher's log, skipped", "offset", pos, "to", rep.Next, "records", n, "reason", message(rep.Data))
	c.mu.Lock()
	ps.gaps++
	ps.skipped += n
	ps.acks.skip(pos, rep.Next)
	ps.fetchPos = rep.Next
	ps.high = rep.High
	c.mu.Unlock()
}

// maxMessage caps the text of a publisher's error message that goes into
// logs and errors.
const maxMessage = 512

// message returns a publisher's error message, cut to maxMessage bytes.
func message(b []byte) string {
	if len(b) > maxMessage {
		return string(b[:maxMessage]) + "..."
	}
	return string(b)
}

// resetToOldest moves a publisher's position from pos, out of range, to
// the oldest retained record, under the ResetToOldest policy.
func (c *Consumer) resetToOldest(lg *slog.Logger, ps *pubState, pos uint64, rep Reply) {
	lg.Warn("offset out of range, moving to the oldest", "offset", pos, "oldest", rep.Oldest, "next", rep.High)
	c.mu.Lock()
	defer c.mu.Unlock()
	ps.resets++
	ps.gen++
	if rep.Oldest > pos {
		ps.skipped += rep.Oldest - pos
	}
	ps.setPositionLocked(spool.Position{Next: rep.Oldest, ID: ps.logID}, false)
	ps.fetchPos = rep.Oldest
}

// position returns the next offset to fetch from a publisher.
func (c *Consumer) position(ps *pubState) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ps.fetchPos
}

// stop ends a publisher's fetcher for good with a *FetchError at offset
// pos: Err reports it from now on, and Next returns it once, after the
// records the fetcher handed over before (unless ctx ends first: the
// fetcher was stopped, the consumer is closing).
func (c *Consumer) stop(ctx context.Context, lg *slog.Logger, ps *pubState, pos uint64, cause error) {
	err := &FetchError{Publisher: ps.name, Stream: c.cfg.Stream, Offset: pos, Err: cause}
	lg.Warn("stopped pulling from publisher", "offset", pos, "err", cause)
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	ps.stopped = err
	c.mu.Unlock()
	select {
	case c.batches <- &delivery{err: err}:
	case <-ctx.Done():
	}
}

// startPosition decides where to start on a publisher: where this consumer
// left off in this process, its committed position, or the Start policy. It
// returns ctx.Err(), or an error wrapping ErrProtocol when the publisher
// keeps refusing the request for a start position.
func (c *Consumer) startPosition(ctx context.Context, pc *pullConn, ps *pubState, unlisted bool) (uint64, error) {
	c.mu.Lock()
	if ps.started {
		pos := ps.fetchPos
		c.mu.Unlock()
		return pos, nil
	}
	c.mu.Unlock()
	p, committed, checked := c.committedPosition(ps.name)
	if !committed {
		var err error
		if p.Next, err = c.policyStart(ctx, pc, ps, unlisted); err != nil {
			return 0, err
		}
	}
	c.mu.Lock()
	ps.started = true
	ps.fetchPos, ps.commit = p.Next, p.Next
	ps.setPositionLocked(p, checked)
	if !committed {
		ps.commit = ^uint64(0) // nothing committed yet: commit the start
	}
	c.mu.Unlock()
	return p.Next, nil
}

// policyStart returns the position the Start policy names on a
// publisher, asking it where needed.
func (c *Consumer) policyStart(ctx context.Context, pc *pullConn, ps *pubState, unlisted bool) (uint64, error) {
	switch c.cfg.Start.Kind {
	case StartOffset:
		return c.cfg.Start.Offset, nil
	}
	op, arg := OpMeta, uint64(0)
	if c.cfg.Start.Kind == StartTime {
		op, arg = OpSeekTime, uint64(c.cfg.Start.Time.UnixNano())
	}
	refused := 0 // bad requests in a row
	for {
		id := pc.send(ctx, op, arg)
		rep, err := pc.await(ctx, id)
		if err == nil && rep.Status == StatusForbidden {
			return 0, forbidden(rep)
		}
		if err == nil && rep.Status == StatusOK {
			if c.cfg.Start.Kind == StartEarliest {
				return rep.Oldest, nil
			}
			return rep.Next, nil // the next offset (latest) or the time's offset
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		wait := time.Second
		if err == nil && unlisted && rep.Status == StatusUnknown {
			pc.lg.Debug("unlisted publisher does not serve the stream")
			wait = unlistedRetry
		} else if !errors.Is(err, errReconnected) {
			c.countError(ps)
		}
		if err == nil && wait == time.Second {
			pc.lg.Warn("start position refused", "op", int(op), "status", rep.Status.String(), "err", message(rep.Data))
			if rep.Status == StatusBadRequest {
				if refused++; refused >= maxBadReplies {
					return 0, fmt.Errorf("%w: the publisher refused %d requests for a start position in a row, last: %s", ErrProtocol, refused, message(rep.Data))
				}
			} else {
				refused = 0
			}
		}
		if err == nil && !ctxutil.Sleep(ctx, wait) {
			return 0, ctx.Err()
		}
	}
}

// forbidden is the cause of a fetcher stopped by a StatusForbidden reply.
func forbidden(rep Reply) error {
	return fmt.Errorf("%w: %s", ErrForbidden, message(rep.Data))
}

func (c *Consumer) countError(ps *pubState) {
	c.mu.Lock()
	ps.errors++
	c.mu.Unlock()
}

// pullConn is one fetcher's DEALER socket and request numbering.
type pullConn struct {
	c       *Consumer
	ps      *pubState
	sock    *socket.Socket
	lg      *slog.Logger
	version uint8 // protocol version of the requests

	waitMu     sync.Mutex
	conns      uint64             // connections re-established (see watchEvents)
	sentOn     uint64             // conns when the last request was sent
	cancelWait context.CancelFunc // ends the wait for a reply; nil when none
}

// errFellBack reports that the publisher answered with an older protocol
// version, which the connection now speaks: send the request again.
var errFellBack = errors.New("pull: publisher speaks an older protocol version")

func (pc *pullConn) sendFetch(ctx context.Context, pos uint64) uint32 {
	return pc.send(ctx, OpFetch, pos)
}

// send sends a request and returns its id. A failed send is left to the
// reply timeout, which sends again. A fetch carries the log identity and
// epoch of the publisher's position.
func (pc *pullConn) send(ctx context.Context, op Op, arg uint64) uint32 {
	cfg := &pc.c.cfg
	r := Request{Version: pc.version, Op: op, ID: reqIDs.Add(1), Offset: arg, MaxBytes: uint32(cfg.MaxBytes), Stream: cfg.Stream, Epoch: NoEpoch}
	if op == OpFetch {
		r.MaxWaitMillis = uint32(cfg.MaxWait / time.Millisecond)
		pc.c.mu.Lock()
		r.LogID, r.Epoch = pc.ps.logID, pc.ps.logEpoch
		pc.c.mu.Unlock()
	}
	pc.sent()
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
	rctx, reconnected, stop := pc.waitContext(ctx)
	defer stop()
	for {
		m, err := pc.sock.Recv(rctx)
		if err != nil {
			if ctx.Err() == nil && reconnected() {
				return Reply{}, errReconnected
			}
			return Reply{}, err
		}
		rep, err := DecodeReply(m.Frames)
		if err != nil {
			pc.lg.Warn("malformed reply", "err", err)
			continue
		}
		if rep.Status == StatusBadRequest && rep.Version < pc.version {
			// A publisher that does not speak our version answers in
			// its own, without our request's id.
			// It answers in the oldest version, which need not be its
			// newest: step down one version at a time.
			pc.version = max(rep.Version, pc.version-1)
			pc.lg.Warn("publisher speaks an older pull protocol, falling back", "version", pc.version, "err", message(rep.Data))
			return Reply{}, errFellBack
		}
		if rep.ID == id {
			return rep, nil
		}
	}
}

// maxBadReplies is how many bad replies in a row (undecodable, not matching
// their header, refused as bad requests) stop a publisher's fetcher:
// damage on the publisher's disk is reported, never skipped.
const maxBadReplies = 5

// errBadReply reports a reply whose records do not match what it claims.
var errBadReply = errors.New("pull: reply does not match its header")

// decodeReply decodes the records of a fetch reply from pos on and checks
// them against the reply's header: offsets dense from pos up to rep.Next.
// On damage or a mismatch it returns the records before it, which are
// valid, with the error.
func decodeReply(rep Reply, pos uint64, maxBatch int, publisher, stream string, gen uint64) ([]Message, error) {
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
			ID: r.ID, Time: r.Time, Headers: r.Headers, Value: r.Value, LogID: rep.LogID, Epoch: rep.Epoch, gen: gen,
		})
		return nil
	})
	if err != nil {
		return msgs, err
	}
	if want != rep.Next {
		return msgs, fmt.Errorf("%w: records end at %d, header says %d", errBadReply, want, rep.Next)
	}
	return msgs, nil
}
