package group

import (
	"context"
	"time"

	"github.com/fastmq/fastmq/discovery"
)

// MemberService is the gossip service a node advertises while it runs
// group members (its spool endpoint as the endpoint, for a valid
// advertisement): a Server with ServerConfig.Watch watches it, and
// releases the leases of a node's members as soon as gossip reports the
// node failed or left.
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

// goneLoop reacts to the Removed events of MemberService instances: a
// node that failed or left has its members' leases released and their
// parked fetches ended at once. (A node that withdrew the service is
// alive: its members keep their leases.)
func (s *Server) goneLoop(events <-chan discovery.Event) {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.Type != discovery.Removed || (ev.Reason != discovery.ReasonFailed && ev.Reason != discovery.ReasonLeft) {
				continue
			}
			s.releaseNodes(map[string]bool{ev.Instance.Node: true})
		}
	}
}

// releaseNodes releases the leases of every member on the gone nodes, in
// every group, and serves the parked fetches that can now be served.
func (s *Server) releaseNodes(gone map[string]bool) {
	isGone := func(m string) bool { return gone[nodeOf(m)] }
	now := time.Now()
	var sends []pendingReply
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	for _, g := range s.groups {
		l, ok := s.cfg.Lookup(g.stream)
		if !ok {
			continue
		}
		s.dropParkedLocked(g, isGone)
		if len(g.held) == 0 {
			continue
		}
		if n := s.releaseLocked(g, isGone, now); n > 0 {
			s.log.Info("released the leases of gone members", "stream", g.stream, "group", g.group, "leases", n)
			sends = append(sends, s.kickLocked(g, l)...)
		}
	}
	s.mu.Unlock()
	s.sendAll(sends)
	s.wakeFlusher() // the dropped parked fetches' empty replies
}

// MemberServiceOf is the advertisement of MemberService by a node whose
// spool server listens at spoolEndpoint.
func MemberServiceOf(spoolEndpoint string) discovery.Service {
	return discovery.Service{Name: MemberService, Kind: MemberKind, Endpoints: []string{spoolEndpoint}}
}
