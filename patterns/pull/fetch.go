package pull

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	pc, hangUp, err := c.dialPublisher(f, lg)
	if err != nil {
		c.stop(ctx, lg, f.ps, c.position(f.ps), err)
		return
	}
	defer hangUp()
	pos, err := c.startPosition(ctx, pc, f.ps, f.unlisted)
	if err != nil {
		if ctx.Err() == nil {
			c.stop(ctx, lg, f.ps, c.position(f.ps), err)
		}
		return
	}
	r := &fetchRun{c: c, f: f, pc: pc, lg: lg, pos: pos}
	r.run(ctx)
}

// dialPublisher makes the DEALER socket of a fetcher and connects it to
// the publisher. hangUp closes the socket and waits for its event watcher.
func (c *Consumer) dialPublisher(f *fetcher, lg *slog.Logger) (pc *pullConn, hangUp func(), err error) {
	scfg := c.cfg.Socket
	if scfg.Logger == nil {
		scfg.Logger = c.cfg.Logger
	}
	if scfg.ReconnectIntervalMax == 0 {
		scfg.ReconnectIntervalMax = 2 * time.Second
	}
	sock, err := socket.New(socket.Dealer, scfg)
	if err != nil {
		return nil, nil, fmt.Errorf("pull: create socket: %w", err)
	}
	pc = &pullConn{c: c, ps: f.ps, sock: sock, lg: lg, version: ProtocolVersion}
	watched := make(chan struct{})
	go pc.watchEvents(sock.Events(), watched)
	hangUp = func() {
		sock.Close() // closes the event channel: the watcher ends
		<-watched
	}
	if err := sock.Connect(f.endpoint); err != nil {
		hangUp()
		return nil, nil, fmt.Errorf("pull: connect to %s: %w", f.endpoint, err)
	}
	return pc, hangUp, nil
}

// fetchRun is the state of one fetcher's request loop: the position of
// the next fetch, the request in flight, and what is owed to the next
// delivery. Only the fetcher's goroutine uses it.
type fetchRun struct {
	c  *Consumer
	f  *fetcher
	pc *pullConn
	lg *slog.Logger

	pos uint64 // offset of the next fetch
	id  uint32 // request in flight
	// resetPending: the position jumped (another log, divergence, out of
	// range); the next delivered record carries Reset.
	resetPending bool
	badReplies   int // in a row
}

// run keeps one fetch in flight while records are delivered: the next is
// sent before the records of the current reply are handed over. After a
// bad reply, the valid records it held are delivered first and the fetch
// is sent again after a pause. It returns when ctx ends or the publisher
// is stopped.
func (r *fetchRun) run(ctx context.Context) {
	r.send(ctx)
	for {
		rep, err := r.pc.await(ctx, r.id)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !errors.Is(err, errReconnected) {
				r.c.countError(r.f.ps)
			}
			r.send(ctx)
			continue
		}
		if !r.reply(ctx, rep) {
			return
		}
	}
}

// send sends the next fetch, at r.pos.
func (r *fetchRun) send(ctx context.Context) {
	r.id = r.pc.sendFetch(ctx, r.pos)
}

// reply acts on one reply to the fetch in flight and sends the next. It
// returns false when the fetcher must end.
func (r *fetchRun) reply(ctx context.Context, rep Reply) bool {
	c, ps := r.c, r.f.ps
	switch rep.Status {
	case StatusOK:
		if !c.sameLog(ps, rep) {
			return r.otherLog(ctx, rep)
		}
		if len(rep.Data) == 0 || rep.Next <= r.pos {
			c.mu.Lock()
			ps.high = rep.High
			ps.learnLocked(rep, r.pos, false)
			c.mu.Unlock()
			r.send(ctx)
			return true
		}
		c.mu.Lock()
		gen := ps.gen
		c.mu.Unlock()
		msgs, bad := decodeReply(rep, r.pos, c.cfg.MaxBatchBytes, ps.name, c.cfg.Stream, gen)
		return r.deliver(ctx, rep, msgs, bad)
	case StatusGap:
		if rep.Next <= r.pos || rep.Next > rep.High {
			return r.deliver(ctx, rep, nil, fmt.Errorf("%w: gap up to %d for a fetch at %d with high %d", errBadReply, rep.Next, r.pos, rep.High))
		}
		c.skipGap(r.lg, ps, r.pos, rep)
		r.pos = rep.Next
	case StatusOtherLog:
		return r.otherLog(ctx, rep)
	case StatusDiverged:
		if rep.Next >= r.pos {
			return r.deliver(ctx, rep, nil, fmt.Errorf("%w: diverged at %d for a fetch at %d", errBadReply, rep.Next, r.pos))
		}
		c.diverged(r.lg, ps, r.pos, rep)
		r.pos = rep.Next
		r.resetPending = true
	case StatusDamaged:
		c.stop(ctx, r.lg, ps, r.pos, fmt.Errorf("%w: %s", ErrDamaged, message(rep.Data)))
		return false
	case StatusForbidden:
		c.stop(ctx, r.lg, ps, r.pos, forbidden(rep))
		return false
	case StatusOutOfRange:
		if c.cfg.OnOutOfRange == StopPublisher {
			c.stop(ctx, r.lg, ps, r.pos, fmt.Errorf("%w (oldest %d, next %d): %s", ErrOutOfRange, rep.Oldest, rep.High, message(rep.Data)))
			return false
		}
		c.resetToOldest(r.lg, ps, r.pos, rep)
		r.pos = rep.Oldest
		r.resetPending = true
	case StatusBadRequest:
		return r.deliver(ctx, rep, nil, fmt.Errorf("%w: the publisher refused the request: %s", errBadReply, message(rep.Data)))
	default:
		return r.refused(ctx, rep)
	}
	r.send(ctx)
	return true
}

// otherLog follows the publisher to the log it now serves (another
// identity, or a new epoch) and sends the next fetch there.
func (r *fetchRun) otherLog(ctx context.Context, rep Reply) bool {
	pos, err := r.c.otherLog(ctx, r.pc, r.lg, r.f.ps, r.pos, rep, r.f.unlisted)
	if err != nil {
		return false
	}
	r.pos = pos
	r.resetPending = true
	r.send(ctx)
	return true
}

// refused waits and asks again after a status the fetcher cannot act on.
func (r *fetchRun) refused(ctx context.Context, rep Reply) bool {
	wait := time.Second
	if r.f.unlisted && rep.Status == StatusUnknown {
		r.lg.Debug("unlisted publisher does not serve the stream", "offset", r.pos)
		wait = unlistedRetry
	} else {
		r.c.countError(r.f.ps)
		r.lg.Warn("fetch refused", "offset", r.pos, "status", rep.Status.String(), "err", message(rep.Data))
	}
	if !ctxutil.Sleep(ctx, wait) {
		return false
	}
	r.send(ctx)
	return true
}

// deliver hands over the records decoded from rep, after sending the next
// fetch when the reply was good. bad says what is wrong with the reply:
// its valid records are still delivered, then the fetch is sent again
// after a pause, and the publisher is stopped after maxBadReplies bad
// replies in a row.
func (r *fetchRun) deliver(ctx context.Context, rep Reply, msgs []Message, bad error) bool {
	c, ps := r.c, r.f.ps
	if len(msgs) > 0 {
		c.mu.Lock()
		ps.learnLocked(rep, msgs[0].Offset, true)
		c.mu.Unlock()
	}
	if bad == nil {
		r.badReplies = 0
		r.pos = rep.Next
		r.send(ctx)
	} else {
		r.badReplies++
		c.countError(ps)
		if n := len(msgs); n > 0 {
			r.pos = msgs[n-1].Offset + 1
		}
		r.lg.Warn("bad fetched data", "offset", r.pos, "err", bad)
	}
	if r.resetPending && len(msgs) > 0 {
		msgs[0].Reset = true
		r.resetPending = false
	}
	if len(msgs) > 0 && !c.deliver(ctx, ps, msgs, r.pos, rep.High) {
		return false
	}
	if bad == nil {
		return true
	}
	if r.badReplies >= maxBadReplies {
		cause := ErrProtocol
		if errors.Is(bad, spool.ErrCorrupt) {
			cause = ErrDamaged
		}
		c.stop(ctx, r.lg, ps, r.pos, fmt.Errorf("%w: %d bad replies in a row, last: %w", cause, r.badReplies, bad))
		return false
	}
	if !ctxutil.Sleep(ctx, 200*time.Millisecond) {
		return false
	}
	r.send(ctx)
	return true
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
	old := ps.gen
	ps.gen++
	if rep.Oldest > pos {
		ps.skipped += rep.Oldest - pos
	}
	// Moving forward, the records below pos were delivered and may not
	// be acknowledged yet: the floor waits for them, then crosses the
	// offsets retention removed. (Moving back, the floor goes back.)
	keep := rep.Oldest >= pos && ps.acks.truncate(pos)
	w := ps.acks
	ps.setPositionLocked(spool.Position{Next: rep.Oldest, ID: ps.logID}, false)
	if keep {
		ps.acks = w
		ps.acks.skip(pos, rep.Oldest)
		ps.keepGen, ps.keepBelow = old, pos
	}
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
	case spool.StartOffset:
		return c.cfg.Start.Offset, nil
	}
	op, arg := OpMeta, uint64(0)
	if c.cfg.Start.Kind == spool.StartTime {
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
			if c.cfg.Start.Kind == spool.StartEarliest {
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
