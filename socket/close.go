package socket

import (
	"context"
	"time"
)

// Close stops listening and dialing, gives each connection up to
// Config.Linger to flush its queued messages, closes every connection and
// returns once all the socket's goroutines have exited. Blocked Send and
// Recv calls return ErrClosed. Close is idempotent; it always returns
// nil. To bound the linger by a context as well, use Shutdown.
func (s *Socket) Close() error {
	_ = s.shutdown(context.Background())
	return nil
}

// Shutdown closes the socket gracefully, as http.Server.Shutdown does a
// server: like Close, it stops listening and dialing at once and makes
// blocked Send and Recv calls return ErrClosed, then lingers while the
// connections write what is queued for them, and returns once all the
// socket's goroutines have exited. The linger ends when the queues are
// written (and each peer has read them), when Config.Linger passes or
// when ctx ends, whichever comes first: ctx's deadline bounds the
// writes, and when ctx ends every connection is cut, discarding what is
// still queued. Shutdown returns ctx's error if ctx ended before the
// socket was closed, nil otherwise.
//
// Close is Shutdown with a context that never ends. Calling Shutdown or
// Close again, or both, is safe: a later call waits for the first (a
// later Shutdown only until its own ctx ends, then it cuts the
// connections too).
func (s *Socket) Shutdown(ctx context.Context) error {
	return s.shutdown(ctx)
}

func (s *Socket) shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return s.waitClosed(ctx)
	}
	// A writer blocked on a peer that stopped reading must give up when
	// the linger time is over.
	deadline := time.Now().Add(s.cfg.Linger)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	s.lingerEnd = deadline
	s.closed.Store(true)
	close(s.closing)
	for k, ln := range s.listeners {
		ln.l.Close()
		delete(s.listeners, k)
	}
	for k, ds := range s.dialers {
		for _, d := range ds {
			d.cancel()
		}
		delete(s.dialers, k)
	}
	for c := range s.pending {
		c.Close()
	}
	s.mu.Unlock()
	s.kickDirect() // a Recv reading a connection itself returns ErrClosed
	for _, p := range *s.peers.Load() {
		if s.cfg.Linger < 0 {
			p.shutdown(ErrClosed)
		} else {
			_ = p.conn.SetWriteDeadline(deadline)
		}
	}
	err := s.waitClosed(ctx)
	s.ev.close()
	return err
}

// waitClosed waits for the socket's goroutines to exit once closing is
// closed. If ctx ends first, it cuts every connection, discarding what is
// still queued, waits for them all the same and returns ctx's error.
func (s *Socket) waitClosed(ctx context.Context) error {
	if ctx.Done() == nil {
		s.wg.Wait()
		return nil
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		// The writers give up at ctx's deadline, maybe just before ctx's
		// own timer fires: that is ctx ending first all the same.
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			return context.DeadlineExceeded
		}
		return ctx.Err()
	case <-ctx.Done():
		for _, p := range *s.peers.Load() {
			p.shutdown(ErrClosed)
		}
		<-done
		return ctx.Err()
	}
}
