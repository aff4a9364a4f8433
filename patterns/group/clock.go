package group

import "time"

// clockLoop expires leases, makes delayed redeliveries due, ends parked
// fetches' waits and releases the leases of members gossip reports gone.
func (s *Server) clockLoop() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	lastCheck := time.Time{}
	failedSince := make(map[string]time.Time) // for goneNodes
	for {
		now := time.Now()
		var gone map[string]bool
		if s.cfg.Members != nil && now.Sub(lastCheck) >= s.cfg.MemberCheck {
			lastCheck = now
			gone = goneNodes(s.cfg.Members.Members(), failedSince, now)
		}
		earliest := now.Add(time.Hour)
		if s.cfg.Members != nil {
			earliest = lastCheck.Add(s.cfg.MemberCheck)
		}
		s.mu.Lock()
		// Wake-ups asked for during this pass (a kick that leases a
		// delayed record, say) lower nextTick from here: kept below.
		s.nextTick = now.Add(time.Hour)
		for _, g := range s.groups {
			earliest = s.tickLocked(g, gone, now, earliest)
		}
		earliest = minTime(earliest, s.nextTick)
		s.nextTick = earliest
		s.unlockAndSend()
		timer.Reset(max(time.Until(earliest), time.Millisecond))
		select {
		case <-s.ctx.Done():
			return
		case <-timer.C:
		case <-s.wakeClock:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}

// tickLocked is one clock tick of group g: it forgets and releases the
// members of the gone nodes, expires leases, serves the parked fetches
// that can be served, and returns earliest lowered to g's next deadline.
func (s *Server) tickLocked(g *state, gone map[string]bool, now, earliest time.Time) time.Time {
	l, ok := s.cfg.Lookup(g.Stream)
	if !ok {
		return earliest
	}
	if len(gone) > 0 {
		isGone := func(m string) bool { return gone[nodeOf(m)] }
		forgetLocked(g, isGone)
		s.dropParkedLocked(g, isGone)
		if len(g.Held) > 0 {
			if n := s.releaseLocked(g, isGone, now, false); n > 0 {
				s.log.Info("released the leases of gone members", "stream", g.Stream, "group", g.Group, "leases", n)
			}
		}
	}
	if next, ok := g.BreakExpiredRuns(now); ok && next.Before(earliest) {
		earliest = next
	}
	earliest = s.expireLocked(g, now, earliest)
	s.kickLocked(g, l)
	for _, p := range g.parked {
		if p.deadline.Before(earliest) {
			earliest = p.deadline
		}
	}
	return earliest
}

// expireLocked returns g's leases that ran out to the group and returns
// earliest lowered to the next lease deadline or not-before time.
func (s *Server) expireLocked(g *state, now, earliest time.Time) time.Time {
	for o, p := range g.Pend {
		switch {
		case p.Member != "" && !p.Deadline.After(now):
			g.cnt.Expired++
			p.Note("expired", "", now)
			s.returnLocked(g, o, p, now.Add(g.Set.Delay(p.Deliveries)), "max deliveries")
			if q := g.Pend[o]; q != nil && q.NotBefore.After(now) && q.NotBefore.Before(earliest) {
				earliest = q.NotBefore
			}
		case p.Member != "":
			if p.Deadline.Before(earliest) {
				earliest = p.Deadline
			}
		case p.NotBefore.After(now) && p.NotBefore.Before(earliest):
			earliest = p.NotBefore
		}
	}
	return earliest
}

// minTime returns the earlier of a and b.
func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
