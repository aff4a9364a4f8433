package pull

// Long polling: a fetch at the end of a stream is parked until records
// arrive or its wait ends. The server's watch goroutines (one per stream
// with parked fetches) and its expiry loop own this part of its state.

import (
	"time"

	"github.com/fastmq/fastmq/spool"
)

// parkedFetch is a fetch waiting for records at the end of its stream.
type parkedFetch struct {
	env      [][]byte // ROUTER envelope (identity)
	req      Request
	deadline time.Time
}

// park holds a fetch at the end of the stream until records arrive or
// its deadline passes.
func (s *Server) park(l *spool.Log, env [][]byte, req Request, deadline time.Time) {
	peer := string(env[0])
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if s.perPeer[peer] >= maxParkedPerPeer || s.nParked >= maxParked {
		s.mu.Unlock()
		// Bounded memory whatever the peers do: answer at once, empty.
		now := req
		now.MaxWaitMillis = 0
		s.serve(l, env, now)
		return
	}
	s.perPeer[peer]++
	s.nParked++
	s.parked[req.Stream] = append(s.parked[req.Stream], &parkedFetch{env: env, req: req, deadline: deadline})
	start := !s.watching[req.Stream]
	if start {
		s.watching[req.Stream] = true
		s.wg.Add(1)
	}
	signal := s.earliest.IsZero() || deadline.Before(s.earliest)
	if signal {
		s.earliest = deadline
	}
	s.mu.Unlock()
	if start {
		go s.watch(req.Stream, l)
	}
	if signal {
		select {
		case s.wakeExp <- struct{}{}:
		default:
		}
	}
	// Data may have arrived between the check and the park.
	if l.NextOffset() > req.Offset {
		s.wake(req.Stream, l)
	}
}

// Limits on parked fetches, so that no peer can make the server hold
// unbounded state. Past them, a fetch at the tail is answered at once.
const (
	maxParkedPerPeer = 64
	maxParked        = 65536
)

// unparkLocked updates the counters for a fetch leaving the parked set.
func (s *Server) unparkLocked(p *parkedFetch) {
	peer := string(p.env[0])
	if s.perPeer[peer]--; s.perPeer[peer] <= 0 {
		delete(s.perPeer, peer)
	}
	s.nParked--
}

// watch waits on one stream's tail and answers parked fetches as it grows.
// One goroutine per stream with parked fetches; it ends with the server.
func (s *Server) watch(stream string, l *spool.Log) {
	defer s.wg.Done()
	// Read the position before serving, so an append that lands while
	// wake runs is seen by the next Wait.
	seen := l.NextOffset()
	s.wake(stream, l)
	for {
		if err := l.Wait(s.ctx, seen); err != nil {
			s.mu.Lock()
			delete(s.watching, stream) // a later park starts a new watcher
			s.mu.Unlock()
			if s.ctx.Err() == nil {
				s.log.Warn("stop watching stream", "stream", stream, "err", err)
			}
			return
		}
		seen = l.NextOffset()
		s.wake(stream, l)
	}
}

// wake serves every parked fetch of stream whose offset now has data.
func (s *Server) wake(stream string, l *spool.Log) {
	next := l.NextOffset()
	s.mu.Lock()
	list := s.parked[stream]
	var ready []*parkedFetch
	keep := list[:0]
	for _, p := range list {
		if p.req.Offset < next {
			ready = append(ready, p)
			s.unparkLocked(p)
		} else {
			keep = append(keep, p)
		}
	}
	for i := len(keep); i < len(list); i++ {
		list[i] = nil
	}
	s.parked[stream] = keep
	s.mu.Unlock()
	if cur, ok := s.cfg.Lookup(stream); ok {
		l = cur // the stream's log now, should it have been replaced
	}
	for _, p := range ready {
		s.serve(l, p.env, p.req)
	}
}

// expiryLoop answers parked fetches whose wait ended with an empty reply.
func (s *Server) expiryLoop() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		var expired []*parkedFetch
		earliest := now.Add(time.Hour)
		s.mu.Lock()
		for stream, list := range s.parked {
			keep := list[:0]
			for _, p := range list {
				if !p.deadline.After(now) {
					expired = append(expired, p)
					s.unparkLocked(p)
					continue
				}
				if p.deadline.Before(earliest) {
					earliest = p.deadline
				}
				keep = append(keep, p)
			}
			for i := len(keep); i < len(list); i++ {
				list[i] = nil
			}
			s.parked[stream] = keep
		}
		s.earliest = earliest
		s.mu.Unlock()
		for _, p := range expired {
			if l, ok := s.cfg.Lookup(p.req.Stream); ok {
				s.serve(l, p.env, p.req)
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(time.Until(earliest))
		select {
		case <-s.ctx.Done():
			return
		case <-timer.C:
		case <-s.wakeExp:
		}
	}
}
