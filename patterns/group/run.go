package group

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/fastmq/fastmq/patterns/group/internal/wire"
)

// Handler processes one record for Run: nil acknowledges it, an error
// naks it (redelivered after the group's backoff).
type Handler func(ctx context.Context, msg *Message) error

// Run calls h for every record from concurrency goroutines (default 1),
// until ctx ends or the member closes (no handler starts after ctx
// ended, even for records already buffered); it returns that error after the
// running handlers have returned and their records are settled. A handler
// that fails once ctx ended (stopped by the shutdown ctx asks for) leaves
// its record unsettled rather than naked: Shutdown gives the lease back, as
// it does the buffered records', without a failed delivery counted
// against MaxDeliver. A handler's goroutine takes the next record as
// soon as it returns. Its acks (or naks) go to the publisher in the
// background, a few at a time: once it settled 32 records, when it waits
// for records, and at most a millisecond after a record was settled; then
// coalesced with the others into one request per publisher and flush,
// even after ctx ended (each request waits at most 10 s for its answer).
// The settles queued per publisher are bounded: about MaxAckPending, as a
// publisher leases a member no more, and never beyond the link's queue
// (4096 batches), past which a handler's goroutine waits (leases that ran
// out and were leased again can take it there).
func (m *Member) Run(ctx context.Context, concurrency int, h Handler) error {
	if concurrency <= 0 {
		concurrency = 1
	}
	// Settles outlive ctx: a handler's record is settled even when ctx
	// ended while it ran. They end when the link does (each request
	// waits at most 10 s for its answer).
	r := &runner{m: m, ctx: ctx, sctx: context.WithoutCancel(ctx), h: h}
	r.done = func(err error) {
		if err != nil && !errors.Is(err, ErrClosed) {
			m.log.Warn("settle record", "err", err)
		}
		r.settles.Done()
	}
	errc := make(chan error, concurrency)
	var workers sync.WaitGroup
	for range concurrency {
		workers.Add(1)
		go func() {
			defer workers.Done()
			w := &worker{r: r}
			w.timer = time.AfterFunc(time.Hour, w.flush)
			w.timer.Stop()
			defer w.timer.Stop()
			for {
				if err := ctx.Err(); err != nil {
					// No handler starts once ctx ended, though records
					// wait in the buffer (they go back on Shutdown).
					w.flush()
					errc <- err
					return
				}
				msg, err := m.next(ctx, false)
				if msg == nil && err == nil {
					// Nothing buffered: settle what was handled before
					// waiting.
					w.flush()
					msg, err = m.next(ctx, true)
				}
				if errors.Is(err, ErrForbidden) {
					if m.cfg.OnForbidden != nil {
						m.cfg.OnForbidden(err)
					}
					continue // one publisher refused (logged): the others serve
				}
				if err == nil && ctx.Err() != nil {
					// ctx ended while next waited and a chunk came too:
					// the record is not handled (it goes back on Shutdown).
					err = ctx.Err()
				}
				if err != nil {
					w.flush()
					errc <- err
					return
				}
				w.handle(msg)
			}
		}()
	}
	workers.Wait()
	r.settles.Wait()
	return <-errc
}

// A Run goroutine's settles are queued once there are maxRunSettles, or
// ackDelay after the first of them (by a timer: the goroutine may be in a
// handler that does not return soon).
const (
	maxRunSettles = 32
	ackDelay      = time.Millisecond
)

// runner is one Run's state, shared by its goroutines.
type runner struct {
	m         *Member
	ctx, sctx context.Context // Run's, and the settles' (never cancelled)
	h         Handler
	settles   sync.WaitGroup
	done      func(error) // a settle's end
}

// worker is one Run goroutine's settles not queued yet; its timer
// queues them too.
type worker struct {
	r     *runner
	timer *time.Timer // runs flush ackDelay after recs's first
	mu    sync.Mutex
	recs  []settleRec
	ln    *link // recs's publisher
}

// handle calls the handler for msg and notes its settle.
func (w *worker) handle(msg *Message) {
	r := w.r
	if herr := r.h(r.ctx, msg); herr != nil {
		if r.ctx.Err() != nil {
			// Run's ctx ended while the handler ran (a shutdown): the
			// failure is the shutdown's, not the record's. No nak,
			// which would count against MaxDeliver (and could even
			// lease the record back to this member): the lease stays,
			// to be given back by Shutdown or to run out.
			r.m.log.Debug("handler stopped by the end of Run", "offset", msg.Offset, "err", herr)
			return
		}
		if r.m.log.Enabled(r.ctx, slog.LevelDebug) {
			r.m.log.Debug("handler failed", "offset", msg.Offset, "err", herr)
		}
		// A nak of its own, with the handler's error as its reason:
		// the publisher keeps it in the record's delivery history and
		// its dead letter (failures are rare: no batch needed).
		if ln := msg.linkOf(); ln != nil {
			r.settles.Add(1)
			e := wire.Entry{Offset: msg.Offset, Delivery: msg.Delivery, Reason: clipReason(herr.Error())}
			if err := ln.queueSettle(r.sctx, settleReq{op: wire.OpNak, e: e, done: r.done, lazy: true}); err != nil {
				r.settles.Add(-1)
			}
		}
		return
	}
	// A record whose publisher is gone is not settled: its lease ends
	// there.
	ln := msg.linkOf()
	if ln == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ln != w.ln {
		w.flushLocked()
		w.ln = ln
	}
	if len(w.recs) == 0 {
		w.recs = make([]settleRec, 0, maxRunSettles)
		w.timer.Reset(ackDelay)
	}
	w.recs = append(w.recs, settleRec{msg.Offset, msg.Delivery, wire.OpAck})
	if len(w.recs) >= maxRunSettles {
		w.flushLocked()
	}
}

// flush queues the goroutine's settles, as one batch.
func (w *worker) flush() {
	w.mu.Lock()
	w.flushLocked()
	w.mu.Unlock()
}

func (w *worker) flushLocked() {
	if len(w.recs) == 0 {
		return
	}
	w.timer.Stop()
	r := w.r
	r.settles.Add(len(w.recs))
	if err := w.ln.queueSettle(r.sctx, settleReq{recs: w.recs, done: r.done, lazy: true}); err != nil {
		r.settles.Add(-len(w.recs))
	}
	w.recs = nil
}
