// Package discoverytest provides an in-memory stand-in for discovery: a Mesh
// of Nodes that see each other's advertisements at once, without sockets or
// timers. It follows the discovery.Interface contract (initial state as
// Added, coalesced per-instance updates, removal reasons, own services
// included; its watches are discovery.Feeds, the code Membership's own
// watches run), so code written against discovery.Interface can be tested
// deterministically. Failures and departures are simulated with Node.Close
// (failed) and Node.Leave (left).
package discoverytest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/fastmq/fastmq/discovery"
)

// Mesh is an in-memory cluster. It is safe for concurrent use.
type Mesh struct {
	mu       sync.Mutex
	nodes    map[string]*nodeState
	watchers map[*watcher]struct{}
	wg       sync.WaitGroup
	ctx      context.Context // cancelled by Close: every watch ends
	cancel   context.CancelFunc
	closed   bool
	nextPort int
}

type nodeState struct {
	name     string
	identity string
	addr     string
	status   discovery.Status
	services map[string]discovery.Service
	spool    *discovery.SpoolAd
}

// NewMesh returns an empty mesh. Close it to end all watches.
func NewMesh() *Mesh {
	ms := &Mesh{nodes: map[string]*nodeState{}, watchers: map[*watcher]struct{}{}, nextPort: 7946}
	ms.ctx, ms.cancel = context.WithCancel(context.Background())
	return ms
}

// Close ends every watch (their channels close) and waits for the
// goroutines that feed them. Idempotent.
func (ms *Mesh) Close() error {
	ms.mu.Lock()
	ms.closed = true
	ms.cancel()
	ms.mu.Unlock()
	ms.wg.Wait()
	return nil
}

// Join adds a live node under name, with a new identity
// (discovery.NewIdentity). A name that is alive already is an error; a
// failed or left name is taken over (a restart).
func (ms *Mesh) Join(name string) (*Node, error) {
	return ms.JoinIdentity(name, discovery.NewIdentity())
}

// JoinIdentity is Join with the node's identity (discovery.Config.Identity)
// given: a restart of the same node keeps it, another process under the
// same name has another.
func (ms *Mesh) JoinIdentity(name, identity string) (*Node, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.closed {
		return nil, discovery.ErrClosed
	}
	if old, ok := ms.nodes[name]; ok && old.status == discovery.StatusAlive {
		return nil, fmt.Errorf("discoverytest: node %q is already alive", name)
	}
	ms.nextPort++
	ns := &nodeState{name: name, identity: identity, addr: fmt.Sprintf("127.0.0.1:%d", ms.nextPort), status: discovery.StatusAlive, services: map[string]discovery.Service{}}
	ms.nodes[name] = ns
	return &Node{mesh: ms, state: ns}, nil
}

// Node is one member of a Mesh; it implements discovery.Interface. After
// Close or Leave its methods return discovery.ErrClosed.
type Node struct {
	mesh  *Mesh
	state *nodeState
}

var _ discovery.Interface = (*Node)(nil)

// Name returns the node name.
func (n *Node) Name() string { return n.state.name }

// Identity returns the node's identity.
func (n *Node) Identity() string { return n.state.identity }

// GossipAddr returns the node's simulated gossip address.
func (n *Node) GossipAddr() string { return n.state.addr }

func (n *Node) alive() bool {
	return n.mesh.nodes[n.state.name] == n.state && n.state.status == discovery.StatusAlive
}

// change applies f to this node's state and notifies watchers.
func (n *Node) change(f func(ns *nodeState), reason discovery.Reason) error {
	ms := n.mesh
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.closed || !n.alive() {
		return discovery.ErrClosed
	}
	old := *n.state
	old.services = maps.Clone(n.state.services)
	f(n.state)
	ms.notifyLocked(&old, n.state, reason)
	if n.state.status != discovery.StatusAlive {
		// The node's own watches end, as with a closed Membership.
		for w := range ms.watchers {
			if w.owner == n.state {
				w.cancel()
			}
		}
	}
	return nil
}

// Advertise adds or replaces the service s.
func (n *Node) Advertise(s discovery.Service) error {
	if s.Name == "" || s.Kind == "" || len(s.Endpoints) == 0 {
		return fmt.Errorf("%w: service needs a name, a kind and endpoints", discovery.ErrInvalid)
	}
	s.Endpoints = slices.Clone(s.Endpoints)
	return n.change(func(ns *nodeState) { ns.services[s.Name] = s }, discovery.ReasonWithdrawn)
}

// Withdraw removes the named service.
func (n *Node) Withdraw(name string) error {
	return n.change(func(ns *nodeState) { delete(ns.services, name) }, discovery.ReasonWithdrawn)
}

// AdvertiseSpool replaces the spool advertisement; "" withdraws it.
func (n *Node) AdvertiseSpool(endpoint string, streams []string) error {
	return n.change(func(ns *nodeState) {
		if endpoint == "" {
			ns.spool = nil
			return
		}
		ns.spool = &discovery.SpoolAd{Endpoint: endpoint, Streams: slices.Clone(streams)}
	}, discovery.ReasonWithdrawn)
}

// Close simulates a crash: the others see the node failed.
func (n *Node) Close() error {
	err := n.change(func(ns *nodeState) { ns.status = discovery.StatusFailed }, discovery.ReasonFailed)
	if errors.Is(err, discovery.ErrClosed) {
		return nil
	}
	return err
}

// Leave simulates a graceful departure: the others see the node left.
func (n *Node) Leave(ctx context.Context) error {
	return n.change(func(ns *nodeState) { ns.status = discovery.StatusLeft }, discovery.ReasonLeft)
}

type key struct {
	name   string
	stream bool
}

func instance(ns *nodeState, k key) (discovery.Instance, bool) {
	if ns == nil || ns.status != discovery.StatusAlive {
		return discovery.Instance{}, false
	}
	if k.stream {
		if ns.spool == nil || !slices.Contains(ns.spool.Streams, k.name) {
			return discovery.Instance{}, false
		}
		return discovery.Instance{Node: ns.name, Addr: ns.addr, Identity: ns.identity, Service: discovery.Service{Name: k.name, Kind: discovery.SpoolKind, Endpoints: []string{ns.spool.Endpoint}}}, true
	}
	s, ok := ns.services[k.name]
	if !ok {
		return discovery.Instance{}, false
	}
	s.Endpoints = slices.Clone(s.Endpoints)
	return discovery.Instance{Node: ns.name, Addr: ns.addr, Identity: ns.identity, Service: s}, true
}

func (ms *Mesh) notifyLocked(old, cur *nodeState, reason discovery.Reason) {
	for w := range ms.watchers {
		inst, ok := instance(cur, w.key)
		_, had := instance(old, w.key)
		if !ok && !had {
			continue
		}
		r := discovery.ReasonNone
		if !ok {
			r = reason
		}
		if ok {
			w.feed.Set(cur.name, inst)
		} else {
			w.feed.Remove(cur.name, r)
		}
	}
}

// Lookup returns the live instances of a service sorted by node name.
func (n *Node) Lookup(name string) []discovery.Instance { return n.mesh.lookup(key{name: name}) }

// LookupStream returns the live spool instances of a stream.
func (n *Node) LookupStream(stream string) []discovery.Instance {
	return n.mesh.lookup(key{name: stream, stream: true})
}

func (ms *Mesh) lookup(k key) []discovery.Instance {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var out []discovery.Instance
	for _, ns := range ms.nodes {
		if in, ok := instance(ns, k); ok {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// Members returns every node ever joined, sorted by name.
func (n *Node) Members() []discovery.Member {
	ms := n.mesh
	ms.mu.Lock()
	defer ms.mu.Unlock()
	out := make([]discovery.Member, 0, len(ms.nodes))
	for _, ns := range ms.nodes {
		m := discovery.Member{Name: ns.name, Addr: ns.addr, Identity: ns.identity, Status: ns.status, Tags: map[string]string{}}
		for _, s := range ns.services {
			s.Endpoints = slices.Clone(s.Endpoints)
			m.Services = append(m.Services, s)
		}
		sort.Slice(m.Services, func(i, j int) bool { return m.Services[i].Name < m.Services[j].Name })
		if ns.spool != nil {
			sp := *ns.spool
			sp.Streams = slices.Clone(sp.Streams)
			m.Spool = &sp
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Watch streams changes of a service as discovery.Membership.Watch does.
func (n *Node) Watch(ctx context.Context, name string) (<-chan discovery.Event, error) {
	return n.watch(ctx, key{name: name})
}

// WatchStream streams changes of a stream's spool instances.
func (n *Node) WatchStream(ctx context.Context, stream string) (<-chan discovery.Event, error) {
	return n.watch(ctx, key{name: stream, stream: true})
}

func (n *Node) watch(ctx context.Context, k key) (<-chan discovery.Event, error) {
	ms := n.mesh
	ms.mu.Lock()
	if ms.closed || !n.alive() {
		ms.mu.Unlock()
		return nil, discovery.ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{key: k, owner: n.state, cancel: cancel, feed: discovery.NewFeed()}
	for _, name := range slices.Sorted(maps.Keys(ms.nodes)) { // initial state in name order
		if in, ok := instance(ms.nodes[name], k); ok {
			w.feed.Set(name, in)
		}
	}
	ms.watchers[w] = struct{}{}
	ms.wg.Add(1)
	ms.mu.Unlock()
	go ms.run(ctx, w)
	return w.feed.Events(), nil
}

// watcher is one Watch or WatchStream of a node; its feed turns the
// instances' states into events exactly as discovery's own watchers do.
type watcher struct {
	key    key
	owner  *nodeState
	cancel context.CancelFunc // ends the watch: called when owner fails or leaves
	feed   *discovery.Feed
}

// run delivers w's events until ctx ends, the mesh closes, or the watching
// node itself fails or leaves.
func (ms *Mesh) run(ctx context.Context, w *watcher) {
	defer ms.wg.Done()
	defer func() {
		ms.mu.Lock()
		delete(ms.watchers, w)
		ms.mu.Unlock()
	}()
	defer w.cancel()
	defer context.AfterFunc(ms.ctx, w.cancel)()
	w.feed.Run(ctx)
}
