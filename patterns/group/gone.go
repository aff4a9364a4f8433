package group

import (
	"context"
	"slices"
	"time"

	"github.com/fastmq/fastmq/discovery"
)

// MemberService is the gossip service a node advertises while it runs
// group members (its spool endpoint as the endpoint, for a valid
// advertisement): a Server with ServerConfig.Watch watches it, and
// releases the leases of a node's members as soon as gossip reports the
// node left, or failed and still failed FailedGrace later.
const MemberService = "fastmq-group"

// MemberKind is MemberService's kind.
const MemberKind = "GROUP"

// ServiceWatcher watches the instances of a gossip service;
// *discovery.Membership implements it.
type ServiceWatcher interface {
	Watch(ctx context.Context, name string) (<-chan discovery.Event, error)
}

// DefaultMemberSafetyCheck is how often a server with a ServerConfig.Watch
// still looks at ServerConfig.Members, as a safety net for members whose
// node does not advertise MemberService.
const DefaultMemberSafetyCheck = 5 * time.Second

// FailedGrace is how long a node gossip declared failed must stay failed
// before the leases of its members are released. Under load, SWIM now and
// then declares a live node failed (it missed its probes while starved);
// that node refutes as soon as it runs and is alive again moments later
// (seen up to about 3 s on a loaded 2-core host), still processing what
// it leased. Releasing its leases at once would hand those records to a
// second member while the first still works on them. A node that left
// gracefully is released at once.
//
// A node declared failed that comes back within FailedGrace from the same
// gossip address with the same endpoints is taken for the same process
// (a refuted suspicion) and keeps its leases; one that comes back from
// another address or with other endpoints is a new process, and the
// leases of the old one are released then. A process restarted that fast
// is told by its members' incarnation instead (MemberConfig.Incarnation):
// the first request of a new incarnation releases the old one's leases.
const FailedGrace = 5 * time.Second

// startGoneWatch starts the goroutine that releases the leases of nodes
// gossip reports failed or left.
func (s *Server) startGoneWatch() error {
	events, err := s.cfg.Watch.Watch(s.ctx, MemberService)
	if err != nil {
		return err
	}
	s.wg.Add(1)
	go s.goneLoop(events)
	return nil
}

// LinkFailedGrace is how long a Member keeps its link to a publisher
// gossip declared failed. Stopping the link could not help a publisher
// that is gone, and would hurt one that is alive: a stopped link loses
// the reply of its fetch in flight or waiting at the publisher, and the
// records that fetch leased would stay leased to the member, unseen,
// until AckWait. So the link stays much longer than FailedGrace.
const LinkFailedGrace = 30 * time.Second

// failedNode is a node gossip declared failed whose members still hold
// their leases, for FailedGrace.
type failedNode struct {
	at   time.Time
	inst discovery.Instance // as it was removed
}

// goneLoop reacts to the Removed events of MemberService instances: a
// node that left has its members' leases released and their parked
// fetches ended at once, a node that failed once it stayed failed for
// FailedGrace. (A node that withdrew the service is alive: its members
// keep their leases.)
func (s *Server) goneLoop(events <-chan discovery.Event) {
	defer s.wg.Done()
	failed := make(map[string]failedNode)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-timer.C:
		case ev, ok := <-events:
			if !ok {
				return
			}
			node := ev.Instance.Node
			switch {
			case ev.Type == discovery.Removed && ev.Reason == discovery.ReasonLeft:
				delete(failed, node)
				s.releaseNodes(map[string]bool{node: true})
			case ev.Type == discovery.Removed && ev.Reason == discovery.ReasonFailed:
				if _, ok := failed[node]; !ok {
					failed[node] = failedNode{at: time.Now(), inst: ev.Instance}
				}
			case ev.Type == discovery.Added || ev.Type == discovery.Updated:
				f, ok := failed[node]
				if !ok {
					continue
				}
				delete(failed, node)
				if !sameProcess(f.inst, ev.Instance) {
					s.releaseNodes(map[string]bool{node: true})
				}
			}
		}
		if next, ok := s.releaseFailed(failed, time.Now()); ok {
			timer.Reset(time.Until(next))
		}
	}
}

// releaseFailed releases the nodes of failed that stayed failed for
// FailedGrace and drops them from it. It returns when the next one is due
// (ok false when none is left).
func (s *Server) releaseFailed(failed map[string]failedNode, now time.Time) (next time.Time, ok bool) {
	var due map[string]bool
	for node, f := range failed {
		at := f.at.Add(FailedGrace)
		if !now.Before(at) {
			if due == nil {
				due = make(map[string]bool)
			}
			due[node] = true
			delete(failed, node)
			continue
		}
		if !ok || at.Before(next) {
			next, ok = at, true
		}
	}
	if len(due) > 0 {
		s.releaseNodes(due)
	}
	return next, ok
}

// sameProcess tells whether b, an instance back after a failure, is
// likely the process that a was: a refuted suspicion keeps its gossip
// address and endpoints.
func sameProcess(a, b discovery.Instance) bool {
	return a.Addr == b.Addr && a.Identity == b.Identity && slices.Equal(a.Service.Endpoints, b.Service.Endpoints)
}

// goneNodes returns the names of the nodes gossip says left, and of those
// it says failed that were already failed FailedGrace ago: failedSince,
// owned by the caller, keeps since when each node is seen failed.
func goneNodes(ms []discovery.Member, failedSince map[string]time.Time, now time.Time) map[string]bool {
	var gone map[string]bool
	add := func(name string) {
		if gone == nil {
			gone = make(map[string]bool)
		}
		gone[name] = true
	}
	seen := make(map[string]bool, len(failedSince))
	for _, m := range ms {
		switch m.Status {
		case discovery.StatusLeft, discovery.StatusLeaving:
			add(m.Name)
		case discovery.StatusFailed:
			seen[m.Name] = true
			since, ok := failedSince[m.Name]
			if !ok {
				failedSince[m.Name] = now
			} else if now.Sub(since) >= FailedGrace {
				add(m.Name)
			}
		}
	}
	for name := range failedSince {
		if !seen[name] {
			delete(failedSince, name) // alive again, or reaped
		}
	}
	return gone
}

// releaseNodes releases the leases of every member on the gone nodes, in
// every group, and serves the parked fetches that can now be served.
func (s *Server) releaseNodes(gone map[string]bool) {
	s.releaseWhere(func(m string) bool { return gone[nodeOf(m)] })
}

// maxIncarnations bounds the nodes whose incarnation a server keeps; past
// it the map starts again (a restart then goes unseen until the node's
// next one, and its leases wait for AckWait, as without incarnations).
const maxIncarnations = 4096

// incarnationState is what a server knows of one member node's
// incarnations.
type incarnationState struct {
	cur, prev string
	// shared: the previous incarnation spoke after the current one, so
	// two live processes use the node's name (or one's requests were
	// late): incarnations no longer release anything for that node.
	shared bool
}

// noteIncarnation notes the incarnation of member's node. When it changed,
// the node was restarted: the leases of its members of other incarnations
// are released at once, and their parked fetches ended. A request from the
// incarnation it replaced shows that one alive: the node's name is shared
// by two processes, so nothing is released for it from then on (leases
// wait for gossip or AckWait, as without incarnations) rather than each
// process releasing the other's leases in turn.
func (s *Server) noteIncarnation(member string) {
	node, inc := nodeOf(member), incarnationOf(member)
	if inc == "" {
		return
	}
	s.mu.Lock()
	st, ok := s.incarnations[node]
	switch {
	case ok && inc == st.cur:
		s.mu.Unlock()
		return
	case ok && (st.shared || inc == st.prev):
		warn := !st.shared
		st.shared = true
		s.incarnations[node] = st
		s.mu.Unlock()
		if warn {
			s.log.Warn("two processes use one member node name; restarts of it no longer release leases early", "node", node, "incarnations", []string{st.cur, inc})
		}
		return
	}
	if !ok && len(s.incarnations) >= maxIncarnations {
		clear(s.incarnations)
	}
	s.incarnations[node] = incarnationState{cur: inc, prev: st.cur}
	s.mu.Unlock()
	if !ok {
		return
	}
	s.log.Info("member node restarted", "node", node, "incarnation", inc, "old", st.cur)
	// Only members whose connection is gone: a request naming a new
	// incarnation proves nothing (anyone may send one), a closed
	// connection does.
	s.releaseWhere(func(m string) bool { return nodeOf(m) == node && incarnationOf(m) != inc && s.disconnectedLocked(m) })
}

// releaseWhere releases the leases of every member isGone says is gone,
// in every group, and serves the parked fetches that can now be served.
func (s *Server) releaseWhere(isGone func(member string) bool) {
	now := time.Now()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	for _, g := range s.groups {
		l, ok := s.cfg.Lookup(g.Stream)
		if !ok {
			continue
		}
		forgetLocked(g, isGone)
		s.dropParkedLocked(g, isGone)
		if len(g.Held) == 0 {
			continue
		}
		if n := s.releaseLocked(g, isGone, now, false); n > 0 {
			s.log.Info("released the leases of gone members", "stream", g.Stream, "group", g.Group, "leases", n)
			s.kickLocked(g, l)
		}
	}
	s.unlockAndSend()
	s.wakeFlusher() // the dropped parked fetches' empty replies
}

// MemberServiceOf is the advertisement of MemberService by a node whose
// spool server listens at spoolEndpoint.
func MemberServiceOf(spoolEndpoint string) discovery.Service {
	return discovery.Service{Name: MemberService, Kind: MemberKind, Endpoints: []string{spoolEndpoint}}
}
