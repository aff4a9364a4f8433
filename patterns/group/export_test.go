package group

import "time"

// SetMaxLazyCommit raises the cap on ServerConfig.LazyCommit for a test,
// for servers made until the returned func restores it.
func SetMaxLazyCommit(d time.Duration) (restore func()) {
	old := maxLazyCommit
	maxLazyCommit = d
	return func() { maxLazyCommit = old }
}

// ParkedFetches returns how many fetches of member wait at the group's
// publisher (for tests).
func (s *Server) ParkedFetches(stream, group, member string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[stream+"\x00"+group]
	if g == nil {
		return 0
	}
	n := 0
	for _, p := range g.parked {
		if p.req.Member == member {
			n++
		}
	}
	return n
}
