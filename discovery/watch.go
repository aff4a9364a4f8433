package discovery

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"time"
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
	Node string // node name
	Addr string // the node's gossip host:port
	// Identity is the node's identity (Config.Identity; "" from a node
	// that gossips none): it changes when another process, with another
	// data directory, took over the name.
	Identity string
	// CurveKey is the node's CURVE public key in Z85 (Config.CurveKey),
	// "" from a node that gossips none: its servers speak CURVE with it.
	CurveKey string
	Service  Service       // what it offers
	RTT      time.Duration // estimated round-trip time; 0 if unknown or local
	// Unlisted is set on a stream's instance when the node's spool
	// advertisement is partial (SpoolAd.Partial) and does not list the
	// stream: the node may serve it; ask its spool server.
	Unlisted bool
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

// watcher is one Watch or WatchStream: the key it follows and the feed
// that delivers its events.
type watcher struct {
	key  watchKey
	feed *Feed
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
	w := &watcher{key: k, feed: NewFeed()}
	w.feed.rtt = m.rtt
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	for _, node := range slices.Sorted(maps.Keys(m.view)) { // initial state in name order
		if inst, ok := m.view[node].instance(node, k); ok {
			w.feed.Set(node, inst)
		}
	}
	m.watchers[w] = struct{}{}
	m.wg.Add(1)
	m.mu.Unlock()
	go m.runWatcher(ctx, w)
	return w.feed.Events(), nil
}

// runWatcher runs w's feed until ctx ends or the Membership closes.
func (m *Membership) runWatcher(ctx context.Context, w *watcher) {
	defer m.wg.Done()
	defer func() {
		m.mu.Lock()
		delete(m.watchers, w)
		m.mu.Unlock()
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(m.ctx, cancel)()
	w.feed.Run(ctx)
}
