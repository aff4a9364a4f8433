package group

import (
	"context"
	"time"
)

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

// CloseAndCountSlots closes the member, then counts the buffer slots it
// could give out again (free ones, and those of records still buffered),
// its debts to links' reserves, and its links whose reserve is free (for
// tests: slots should equal Buffer, with no debt and every reserve free).
func (m *Member) CloseAndCountSlots() (slots, owed, reserves, links int) {
	m.mu.Lock()
	lns := make([]*link, 0, len(m.links))
	for _, ln := range m.links {
		lns = append(lns, ln)
	}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.Shutdown(ctx)
	for {
		select {
		case n := <-m.credit.free:
			slots += n
			continue
		default:
		}
		break
	}
	for range len(m.out) {
		slots += len((<-m.out).rest)
	}
	m.qmu.Lock()
	for _, q := range m.queue {
		slots += len(q.c.rest) + q.owed
	}
	m.qmu.Unlock()
	m.credit.owedMu.Lock()
	owed = len(m.credit.owed)
	m.credit.owedMu.Unlock()
	for _, ln := range lns {
		if len(ln.reserve) == 1 {
			reserves++
		}
	}
	return slots, owed, reserves, len(lns)
}

// ShareMemberIDs lets any connection use any member id on s, as before
// ids were bound to connections (for the tests that settle a member's
// leases from a raw socket of their own to see the refusal codes).
func (s *Server) ShareMemberIDs() {
	s.mu.Lock()
	s.shareIDs = true
	s.mu.Unlock()
}
