package group

import (
	"context"
	"errors"
	"log/slog"
	"sync"
)

// Handler processes one record for Run: nil acknowledges it, an error
// naks it (redelivered after the group's backoff).
type Handler func(ctx context.Context, msg *Message) error

// Run calls h for every record from concurrency goroutines (default 1),
// until ctx ends or the member closes; it returns that error after the
// running handlers have returned and their records are settled. A
// handler's goroutine takes the next record as soon as it returns: its
// ack (or nak) goes to the publisher in the background, coalesced with
// the others into one request per publisher and flush, even after ctx
// ended (each request waits at most 10 s for its answer). The settles
// queued per publisher are bounded: about MaxAckPending, as a publisher
// leases a member no more, and never beyond the link's queue (4096), past
// which a handler's goroutine waits (leases that ran out and were leased
// again can take it there).
func (m *Member) Run(ctx context.Context, concurrency int, h Handler) error {
	if concurrency <= 0 {
		concurrency = 1
	}
	// Settles outlive ctx: a handler's record is settled even when ctx
	// ended while it ran. They end when the link does (each request
	// waits at most 10 s for its answer).
	sctx := context.WithoutCancel(ctx)
	var settles sync.WaitGroup
	done := func(err error) {
		if err != nil && !errors.Is(err, ErrClosed) {
			m.log.Warn("settle record", "err", err)
		}
		settles.Done()
	}
	errc := make(chan error, concurrency)
	var workers sync.WaitGroup
	for range concurrency {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				msg, err := m.Next(ctx)
				if errors.Is(err, ErrForbidden) {
					continue // one publisher refused (logged): the others serve
				}
				if err != nil {
					errc <- err
					return
				}
				op := OpAck
				if herr := h(ctx, msg); herr != nil {
					if m.log.Enabled(ctx, slog.LevelDebug) {
						m.log.Debug("handler failed", "offset", msg.Offset, "err", herr)
					}
					op = OpNak
				}
				ln := msg.linkOf()
				if ln == nil {
					continue // the publisher is gone; the lease ends there
				}
				settles.Add(1)
				if err := ln.settleAsync(sctx, op, Entry{Offset: msg.Offset, Delivery: msg.Delivery}, done); err != nil {
					settles.Done()
				}
			}
		}()
	}
	workers.Wait()
	settles.Wait()
	return <-errc
}
