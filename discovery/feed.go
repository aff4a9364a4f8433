package discovery

import (
	"context"
	"slices"
	"time"

	"github.com/fastmq/fastmq/internal/coalesce"
)

// watcherBuffer is the capacity of a watch channel.
const watcherBuffer = 16

// Feed is the delivering end of one watch: the single place where the
// latest state of each node's instance becomes the events Watch promises.
// An instance the reader has not been told of arrives as Added, a change of
// its address, kind or endpoints as Updated, its disappearance as Removed
// with the reason and the last instance the reader was given; a state equal
// to what the reader knows is not sent. States are coalesced per node
// until Run delivers them: a slow reader gets the latest state of each
// instance instead of a backlog, and memory is bounded by the number of
// nodes.
//
// Membership's watches are Feeds. Another implementation of Interface,
// such as the in-memory fake in package discoverytest, uses one so that its
// watches behave as Membership's do.
//
// Set and Remove are safe for concurrent use and never block. Run is
// called once, by the goroutine that owns the feed. The zero value is not
// usable; use NewFeed.
type Feed struct {
	out     chan Event
	pending *coalesce.Queue[string, feedState] // by node
	rtt     func(node string) time.Duration    // fills Instance.RTT if set
}

type feedState struct {
	inst    Instance
	present bool
	reason  Reason
}

// NewFeed returns a feed with nothing pending.
func NewFeed() *Feed {
	return &Feed{out: make(chan Event, watcherBuffer), pending: coalesce.New[string, feedState]()}
}

// Events returns the channel Run delivers on. It is closed when Run
// returns.
func (f *Feed) Events() <-chan Event { return f.out }

// Set records inst as the latest state of node's instance. The caller must
// not modify inst's slices afterwards.
func (f *Feed) Set(node string, inst Instance) {
	f.pending.Put(node, feedState{inst: inst, present: true})
}

// Remove records that node's instance is gone, for reason.
func (f *Feed) Remove(node string, reason Reason) {
	f.pending.Put(node, feedState{reason: reason})
}

// Run delivers events until ctx ends, then closes the Events channel. It
// blocks while the reader does not read, without blocking Set or Remove.
func (f *Feed) Run(ctx context.Context) {
	defer close(f.out)
	known := coalesce.NewKnown[string](sameInstance) // what the reader has been told exists
	for {
		node, st, ok := f.pending.Take()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-f.pending.Ready():
				continue
			}
		}
		var ev Event
		switch ch, prev := known.Apply(node, st.inst, st.present); ch {
		case coalesce.Added:
			ev = Event{Type: Added, Instance: st.inst}
		case coalesce.Updated:
			ev = Event{Type: Updated, Instance: st.inst}
		case coalesce.Removed:
			ev = Event{Type: Removed, Reason: st.reason, Instance: prev}
		default:
			continue
		}
		if st.present && f.rtt != nil {
			ev.Instance.RTT = f.rtt(node)
		}
		select {
		case f.out <- ev:
		case <-ctx.Done():
			return
		}
	}
}

// sameInstance says whether b would tell a watcher nothing new after a.
func sameInstance(a, b Instance) bool {
	return a.Addr == b.Addr && a.Identity == b.Identity && a.Service.Name == b.Service.Name && a.Service.Kind == b.Service.Kind &&
		a.Unlisted == b.Unlisted && slices.Equal(a.Service.Endpoints, b.Service.Endpoints)
}
