package discovery

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/fastmq/fastmq/internal/coalesce"
)

// EventType says what happened to an instance.
type EventType int

// Event types.
const (
	Added   EventType = iota // a new instance (also the initial state of a watch)
	Updated                  // an instance's endpoints, kind or address changed
	Removed                  // the instance is gone; see Reason
)

// String returns "added", "updated" or "removed".
func (t EventType) String() string {
	switch t {
	case Added:
		return "added"
	case Updated:
		return "updated"
	case Removed:
		return "removed"
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// Reason says why an instance was removed.
type Reason int

// Removal reasons.
const (
	ReasonNone      Reason = iota // not a removal
	ReasonFailed                  // the node stopped answering probes
	ReasonLeft                    // the node left gracefully
	ReasonWithdrawn               // the node withdrew the service or stream
)

// String returns "", "failed", "left" or "withdrawn".
func (r Reason) String() string {
	switch r {
	case ReasonNone:
		return ""
	case ReasonFailed:
		return "failed"
	case ReasonLeft:
		return "left"
	case ReasonWithdrawn:
		return "withdrawn"
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// Instance is one node's offer of a service (or, from the stream calls, of a
// spool stream).
type Instance struct {
	Node    string        // node name
	Addr    string        // the node's gossip host:port
	Service Service       // what it offers
	RTT     time.Duration // estimated round-trip time; 0 if unknown or local
}

// Event is one change seen by a watcher. For Removed events Instance is the
// last state the watcher was given.
type Event struct {
	Type     EventType
	Reason   Reason
	Instance Instance
}

type watchKey struct {
	name   string
	stream bool
}

// watcherBuffer is the capacity of a watch channel.
const watcherBuffer = 16

// watcher keeps, per node, only the latest state not yet delivered, so a
// slow reader gets current state instead of an ever-growing backlog. Memory
// is bounded by the number of nodes.
type watcher struct {
	key     watchKey
	out     chan Event
	pending *coalesce.Queue[string, pendingState] // by node
}

type pendingState struct {
	inst    Instance
	present bool
	reason  Reason
}

// push records the latest state of node; it never blocks.
func (w *watcher) push(node string, inst Instance, present bool, reason Reason) {
	w.pending.Put(node, pendingState{inst: inst, present: present, reason: reason})
}

// Watch streams changes to the instances of the named service, starting with
// the current instances as Added events (sorted by node name). It includes
// this node's own advertisement, so a node can consume its own services.
// Updates are coalesced per instance: a slow reader gets the latest state of
// each instance, never a backlog, and never stalls gossip. The channel is
// closed when ctx ends or the Membership closes.
func (m *Membership) Watch(ctx context.Context, name string) (<-chan Event, error) {
	return m.watch(ctx, watchKey{name: name})
}

// WatchStream is Watch for the nodes whose spool serves stream; instances
// are as LookupStream returns them.
func (m *Membership) WatchStream(ctx context.Context, stream string) (<-chan Event, error) {
	return m.watch(ctx, watchKey{name: stream, stream: true})
}

func (m *Membership) watch(ctx context.Context, k watchKey) (<-chan Event, error) {
	w := &watcher{
		key:     k,
		out:     make(chan Event, watcherBuffer),
		pending: coalesce.New[string, pendingState](),
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	nodes := make([]string, 0, len(m.view))
	for node := range m.view {
		nodes = append(nodes, node)
	}
	sort.Strings(nodes)
	for _, node := range nodes {
		if inst, ok := m.view[node].instance(node, k); ok {
			w.push(node, inst, true, ReasonNone)
		}
	}
	m.watchers[w] = struct{}{}
	m.wg.Add(1)
	m.mu.Unlock()
	go m.runWatcher(ctx, w)
	return w.out, nil
}

func (m *Membership) runWatcher(ctx context.Context, w *watcher) {
	defer m.wg.Done()
	defer close(w.out)
	defer func() {
		m.mu.Lock()
		delete(m.watchers, w)
		m.mu.Unlock()
	}()
	known := coalesce.NewKnown[string](sameInstance) // what the reader has been told exists
	for {
		node, st, ok := w.pending.Take()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-m.closing:
				return
			case <-w.pending.Ready():
				continue
			}
		}
		ev, ok := event(known, node, st.inst, st.present, st.reason)
		if !ok {
			continue
		}
		if st.present {
			ev.Instance.RTT = m.rtt(node)
		}
		select {
		case w.out <- ev:
		case <-ctx.Done():
			return
		case <-m.closing:
			return
		}
	}
}

// event returns what a watcher's reader is to be told of a node's latest
// state, given what it has been told before, if anything.
func event(known *coalesce.Known[string, Instance], node string, inst Instance, present bool, r Reason) (Event, bool) {
	switch ch, prev := known.Apply(node, inst, present); ch {
	case coalesce.Added:
		return Event{Type: Added, Instance: inst}, true
	case coalesce.Updated:
		return Event{Type: Updated, Instance: inst}, true
	case coalesce.Removed:
		return Event{Type: Removed, Reason: r, Instance: prev}, true
	}
	return Event{}, false
}

func sameInstance(a, b Instance) bool {
	return a.Addr == b.Addr && a.Service.Name == b.Service.Name && a.Service.Kind == b.Service.Kind &&
		slices.Equal(a.Service.Endpoints, b.Service.Endpoints)
}
