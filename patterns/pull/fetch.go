package pull

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/internal/ctxutil"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

type fetcher struct {
	ps       *pubState
	endpoint string
	cancel   context.CancelFunc
	done     chan struct{}
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
			f.ps.acks.reset(rep.Oldest)
			f.ps.fetchPos = rep.Oldest
			c.mu.Unlock()
			pos = rep.Oldest
			resetPending = true
			id = pc.sendFetch(ctx, pos)
			continue
		default:
			c.countError(f.ps)
			lg.Warn("fetch refused", "offset", pos, "status", rep.Status.String(), "err", string(rep.Data))
			if !ctxutil.Sleep(ctx, time.Second) {
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
			if !ctxutil.Sleep(ctx, 200*time.Millisecond) {
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
				if err == nil && !ctxutil.Sleep(ctx, time.Second) {
					return 0, ctx.Err()
				}
			}
		}
	}
	c.mu.Lock()
	ps.started = true
	ps.fetchPos, ps.commit = pos, pos
	ps.acks.reset(pos)
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
