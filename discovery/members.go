package discovery

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/serf/serf"
)

// consume drains serf's event channel and answers members queries. It never
// blocks on anything but the channel (an answer is one datagram): watchers
// get coalesced updates through their own goroutines.
func (m *Membership) consume() {
	defer m.wg.Done()
	for {
		select {
		case <-m.closing:
			return
		case e := <-m.events:
			switch e := e.(type) {
			case serf.MemberEvent:
				m.handleMemberEvent(e)
			case *serf.Query:
				m.answerQuery(e)
			}
		}
	}
}

func (m *Membership) handleMemberEvent(me serf.MemberEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mem := range me.Members {
		host := mem.Addr.String()
		addr := net.JoinHostPort(host, strconv.Itoa(int(mem.Port)))
		var adv advert
		if mem.Name == m.name {
			adv = m.self
		} else {
			adv = decodeTags(mem.Tags, host)
		}
		if m.log.Enabled(context.Background(), slog.LevelDebug) {
			m.log.Debug("member event", slog.String("peer", mem.Name), slog.String("event", me.Type.String()), slog.String("endpoint", addr))
		}
		switch me.Type {
		case serf.EventMemberJoin, serf.EventMemberUpdate:
			if me.Type == serf.EventMemberJoin && mem.Name != m.name {
				m.log.Info("member joined", slog.String("peer", mem.Name), slog.String("endpoint", addr))
			}
			m.setNodeLocked(mem.Name, &nodeView{addr: addr, status: StatusAlive, adv: adv}, ReasonWithdrawn)
		case serf.EventMemberLeave:
			m.log.Info("member left", slog.String("peer", mem.Name), slog.String("endpoint", addr))
			m.setNodeLocked(mem.Name, &nodeView{addr: addr, status: StatusLeft, adv: adv}, ReasonLeft)
		case serf.EventMemberFailed:
			m.log.Warn("member failed", slog.String("peer", mem.Name), slog.String("endpoint", addr))
			m.setNodeLocked(mem.Name, &nodeView{addr: addr, status: StatusFailed, adv: adv}, ReasonFailed)
		case serf.EventMemberReap:
			m.setNodeLocked(mem.Name, nil, ReasonLeft)
		}
	}
}

// instancesOf lists what a node view offers under watch key k.
func (nv *nodeView) instance(node string, k watchKey) (Instance, bool) {
	if nv == nil || nv.status != StatusAlive {
		return Instance{}, false
	}
	if k.stream {
		sp := nv.adv.spool
		if sp == nil {
			return Instance{}, false
		}
		listed := slices.Contains(sp.Streams, k.name)
		if !listed && !sp.Partial {
			return Instance{}, false
		}
		return Instance{Node: node, Addr: nv.addr, Identity: nv.adv.identity, CurveKey: nv.adv.curveKey, Service: Service{Name: k.name, Kind: SpoolKind, Endpoints: []string{sp.Endpoint}}, Unlisted: !listed}, true
	}
	s, ok := nv.adv.services[k.name]
	if !ok {
		return Instance{}, false
	}
	return Instance{Node: node, Addr: nv.addr, Identity: nv.adv.identity, CurveKey: nv.adv.curveKey, Service: cloneService(s)}, true
}

// setNodeLocked replaces the view of node and tells interested watchers.
// reason is used for instances that disappear while the node stays alive.
func (m *Membership) setNodeLocked(node string, nv *nodeView, reason Reason) {
	old := m.view[node]
	if nv == nil {
		delete(m.view, node)
	} else {
		m.view[node] = nv
	}
	for w := range m.watchers {
		inst, ok := nv.instance(node, w.key)
		_, had := old.instance(node, w.key)
		if !ok && !had {
			continue
		}
		r := ReasonNone
		if !ok {
			r = reason
			if nv != nil && nv.status == StatusAlive {
				r = ReasonWithdrawn
			}
		}
		if ok {
			w.feed.Set(node, inst)
		} else {
			w.feed.Remove(node, r)
		}
	}
}

// Lookup returns the live instances of the named service, including this
// node's own (nil after Close), nearest first: the local node, then by estimated round-trip
// time, nodes without an estimate last, ties by node name.
func (m *Membership) Lookup(name string) []Instance {
	return m.lookup(watchKey{name: name})
}

// LookupStream returns the live nodes whose spool serves stream, as instances
// whose Service is {Name: stream, Kind: SpoolKind, Endpoints: [spool endpoint]},
// ordered as Lookup.
func (m *Membership) LookupStream(stream string) []Instance {
	return m.lookup(watchKey{name: stream, stream: true})
}

func (m *Membership) lookup(k watchKey) []Instance {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	var out []Instance
	for node, nv := range m.view {
		if inst, ok := nv.instance(node, k); ok {
			out = append(out, inst)
		}
	}
	m.mu.Unlock()
	for i := range out {
		out[i].RTT = m.rtt(out[i].Node)
	}
	m.sortInstances(out)
	return out
}

func (m *Membership) sortInstances(out []Instance) {
	rank := func(in Instance) int {
		switch {
		case in.Node == m.name:
			return 0
		case in.RTT > 0:
			return 1
		}
		return 2
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := rank(out[i]), rank(out[j])
		if ri != rj {
			return ri < rj
		}
		if out[i].RTT != out[j].RTT {
			return out[i].RTT < out[j].RTT
		}
		return out[i].Node < out[j].Node
	})
}

// rtt estimates the round-trip time to node from serf's network
// coordinates; 0 when unknown (and for the local node).
func (m *Membership) rtt(node string) time.Duration {
	if node == m.name {
		return 0
	}
	self, err := m.serf.GetCoordinate()
	if err != nil {
		return 0
	}
	other, ok := m.serf.GetCachedCoordinate(node)
	if !ok || !self.IsCompatibleWith(other) {
		return 0
	}
	return self.DistanceTo(other)
}

// Status is a member's state as seen by this node.
type Status int

// Member states. serf does not expose memberlist's suspicion, so a suspected
// node is reported alive until it is declared failed.
const (
	StatusUnknown Status = iota
	StatusAlive
	StatusLeaving
	StatusLeft
	StatusFailed
)

// String returns "alive", "leaving", "left", "failed" or "unknown".
func (s Status) String() string {
	switch s {
	case StatusAlive:
		return "alive"
	case StatusLeaving:
		return "leaving"
	case StatusLeft:
		return "left"
	case StatusFailed:
		return "failed"
	}
	return "unknown"
}

func statusOf(s serf.MemberStatus) Status {
	switch s {
	case serf.StatusAlive:
		return StatusAlive
	case serf.StatusLeaving:
		return StatusLeaving
	case serf.StatusLeft:
		return StatusLeft
	case serf.StatusFailed:
		return StatusFailed
	}
	return StatusUnknown
}

// Member describes one node of the cluster. Tags holds only user tags;
// Services and Spool are the decoded advertisement.
type Member struct {
	Name     string
	Addr     string // gossip host:port
	Identity string // the node's identity (Config.Identity); "" if it gossips none
	CurveKey string // the node's CURVE public key in Z85 (Config.CurveKey); "" if it gossips none
	Status   Status
	Tags     map[string]string
	Services []Service
	Spool    *SpoolAd
	RTT      time.Duration // estimated round-trip time; 0 if unknown or local
}

// Members returns every member serf knows, including failed and left ones
// until they are reaped, sorted by name.
func (m *Membership) Members() []Member {
	if m.isClosed() {
		return nil
	}
	mems := m.serf.Members()
	m.mu.Lock()
	self := m.self
	m.mu.Unlock()
	out := make([]Member, 0, len(mems))
	for _, mem := range mems {
		host := mem.Addr.String()
		adv := self
		if mem.Name != m.name {
			adv = decodeTags(mem.Tags, host)
		}
		var sp *SpoolAd
		if adv.spool != nil {
			c := *adv.spool
			c.Streams = slices.Clone(c.Streams)
			sp = &c
		}
		out = append(out, Member{
			Name:     mem.Name,
			Addr:     net.JoinHostPort(host, strconv.Itoa(int(mem.Port))),
			Identity: adv.identity,
			CurveKey: adv.curveKey,
			Status:   statusOf(mem.Status),
			Tags:     cloneMap(adv.user),
			Services: sortedServices(adv.services),
			Spool:    sp,
			RTT:      m.rtt(mem.Name),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
