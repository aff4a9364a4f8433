package group

import "github.com/fastmq/fastmq/spool"

// watchLocked starts the tail watcher of a stream with parked fetches.
func (s *Server) watchLocked(stream string, l *spool.Log) {
	if s.watching[stream] {
		return
	}
	s.watching[stream] = true
	s.wg.Add(1)
	go s.watch(stream, l)
}

// watch wakes the parked fetches of a stream's groups as the stream grows.
func (s *Server) watch(stream string, l *spool.Log) {
	defer s.wg.Done()
	seen := s.end(l)
	for {
		s.mu.Lock()
		for _, g := range s.groups {
			if g.Stream == stream {
				s.kickLocked(g, l)
			}
		}
		s.unlockAndSend()
		wait := l.WaitWritten
		if s.cfg.LeaseAfterSync {
			wait = l.Wait
		}
		if err := wait(s.ctx, seen); err != nil {
			s.mu.Lock()
			delete(s.watching, stream)
			s.mu.Unlock()
			return
		}
		seen = s.end(l)
	}
}
