package rpc

import (
	"errors"
	"time"

	"github.com/fastmq/fastmq/socket"
)

// Dispatch. Concurrency + 1 receivers call RecvAt on the socket, and
// each runs the request it received itself: no hand-off between a
// receiving goroutine and a worker. A receiver takes one of Concurrency
// slots to run a request; when every slot is taken, the one receiver left
// queues what arrives (up to QueueSize) or refuses it with
// StatusOverloaded, and a receiver that finishes runs the queued requests
// before it gives its slot back. All of it under the Server's mu, so a
// request is never queued while a slot is free.

// receive receives and runs requests until the socket closes or Close.
func (s *Server) receive() {
	defer s.wg.Done()
	var a arena
	for {
		m, arrived, err := s.sock.RecvAt(s.ctx)
		if errors.Is(err, socket.ErrTimeout) && s.ctx.Err() == nil {
			continue // Config.Socket.RecvTimeout: serve for as long as the socket lives
		}
		if err != nil {
			if !errors.Is(err, socket.ErrClosed) && s.ctx.Err() == nil {
				s.log.Error("rpc server receive failed", "err", err)
			}
			s.cancel() // the socket closed under us (its owner closed it): stop the others too
			return
		}
		s.requests.Add(1)
		// The time from arrived (which has a monotonic reading): one
		// clock read where time.Now makes two.
		now := arrived.Add(time.Since(arrived))
		j, ok := s.accept(m.Frames, arrived, now)
		for ok {
			s.run(j, now, &a)
			j, ok = s.finished()
			now = time.Time{} // a queued request: run reads the clock
		}
	}
}

// finished accounts for one request answered or dropped by a receiver
// holding a slot, and returns the next queued request for it to run (ok),
// or gives the slot back.
func (s *Server) finished() (j job, ok bool) {
	s.mu.Lock()
	s.nIn--
	if s.ctx.Err() == nil {
		select {
		case j = <-s.jobs:
			ok = true
		default:
		}
	}
	if !ok {
		s.busy--
	}
	draining := s.draining
	s.mu.Unlock()
	if draining {
		// Only Shutdown waits for this, and only once draining: it reads
		// nIn after setting draining, under mu, so one that ended before
		// is counted there.
		s.signalIdle()
	}
	return j, ok
}

// signalIdle tells Shutdown that a request ended.
func (s *Server) signalIdle() {
	select {
	case s.idle <- struct{}{}:
	default:
	}
}

// accept decodes one request, which arrived at arrived, and answers it
// from the cache, refuses it, queues it, or returns it for the caller to
// run (ok) after taking a slot for it. A request's deadline counts
// from its arrival: the time it waited in the socket's receive queue
// counts against it, as the time in the server's queue does.
func (s *Server) accept(frames [][]byte, arrived, now time.Time) (j job, ok bool) {
	env, body, isReq := splitEnvelope(frames)
	if !isReq || len(body) == 0 {
		s.bad.Add(1) // no REQ envelope: nothing to answer to
		return job{}, false
	}
	j = job{env: env}
	req, err := decodeRequest(body[0])
	switch {
	case errors.Is(err, errNotFastMQ):
		if len(body) != 1 {
			s.bad.Add(1)
			s.replyPlainError(env, "bad-request", "a request is one frame")
			return job{}, false
		}
		j.plain, j.body = true, body[0]
	case err != nil:
		s.bad.Add(1)
		s.log.Debug("malformed request", "err", err)
		if len(body[0]) >= 14 {
			// Answer if the id is readable, so the caller does not wait.
			s.sendReply(env, req.id, StatusBadRequest)
		}
		return job{}, false
	case len(body) != 2:
		s.bad.Add(1)
		s.sendReply(env, req.id, StatusBadRequest)
		return job{}, false
	default:
		j.req, j.body = req, body[1]
		if req.timeout > 0 {
			j.deadline = arrived.Add(req.timeout)
			if !now.Before(j.deadline) {
				s.expired.Add(1) // expired while queued: the caller has given up
				return job{}, false
			}
		}
	}
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		s.unavailable.Add(1)
		s.refuse(env, j, StatusUnavailable, "unavailable", "server shutting down")
		return job{}, false
	}
	if j.req.key != nil {
		k := cacheKey{client: string(j.req.clientID), key: string(j.req.key)}
		if e, ok := s.cache.get(k, now); ok {
			s.hits.Add(1)
			if !e.done {
				if len(e.waiters) >= maxWaiters {
					// Copies of one call beyond a few are a peer
					// misbehaving: they are not held.
					s.mu.Unlock()
					s.overloaded.Add(1)
					s.sendReply(env, req.id, StatusOverloaded)
					return job{}, false
				}
				e.waiters = append(e.waiters, waiter{env: env, id: req.id})
				s.mu.Unlock()
				return job{}, false
			}
			st, fr := e.status, e.frames
			s.mu.Unlock()
			s.sendReply(env, req.id, st, fr...)
			return job{}, false
		}
		s.cache.start(k)
		j.key = &k
	}
	s.nIn++
	if s.busy < s.cfg.Concurrency {
		s.busy++
		s.mu.Unlock()
		return j, true
	}
	select {
	case s.jobs <- j:
		s.mu.Unlock()
		return job{}, false
	default:
		s.nIn--
		if j.key != nil {
			s.cache.abandon(*j.key)
		}
		s.mu.Unlock()
		s.overloaded.Add(1)
		s.refuse(env, j, StatusOverloaded, "overloaded", "server overloaded")
	}
	return job{}, false
}

// refuse answers a request the server will not run: with status, or to a
// plain REQ client (no envelope) with the error word and message.
func (s *Server) refuse(env [][]byte, j job, status Status, word, msg string) {
	if j.plain {
		s.replyPlainError(env, word, msg)
	} else {
		s.sendReply(env, j.req.id, status)
	}
}
