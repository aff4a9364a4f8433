package discovery

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestFeedMapping checks the one mapping from instance states to events
// that Membership and the discoverytest fake share: unchanged states are
// not sent, a removal carries its reason and the last instance sent, and
// states pending together are coalesced per node.
func TestFeedMapping(t *testing.T) {
	f := NewFeed()
	f.rtt = func(node string) time.Duration { return time.Duration(len(node)) * time.Millisecond }
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); f.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	inst := func(node, ep string) Instance {
		return Instance{Node: node, Addr: node + ":7946", Service: Service{Name: "api", Kind: "REP", Endpoints: []string{ep}}}
	}
	next := func() Event {
		t.Helper()
		select {
		case ev := <-f.Events():
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
		}
		return Event{}
	}
	check := func(ev Event, typ EventType, r Reason, node, ep string) {
		t.Helper()
		if ev.Type != typ || ev.Reason != r || ev.Instance.Node != node || ev.Instance.Service.Endpoints[0] != ep {
			t.Fatalf("got %v/%v %s %v, want %v/%v %s %s", ev.Type, ev.Reason, ev.Instance.Node, ev.Instance.Service.Endpoints, typ, r, node, ep)
		}
	}

	f.Set("a", inst("a", "tcp://a:1"))
	ev := next()
	check(ev, Added, ReasonNone, "a", "tcp://a:1")
	if ev.Instance.RTT != time.Millisecond {
		t.Fatalf("rtt %v, want the feed's estimate 1ms", ev.Instance.RTT)
	}
	f.Set("a", inst("a", "tcp://a:1")) // nothing new: not sent
	f.Set("a", inst("a", "tcp://a:2"))
	check(next(), Updated, ReasonNone, "a", "tcp://a:2")
	f.Remove("b", ReasonFailed) // never told of b: not sent
	f.Remove("a", ReasonLeft)
	check(next(), Removed, ReasonLeft, "a", "tcp://a:2")

	// With the reader away, b's three states coalesce into its latest, and
	// c's added-then-removed into nothing at all.
	cancel()
	wg.Wait()
	f = NewFeed()
	f.Set("b", inst("b", "tcp://b:1"))
	f.Set("c", inst("c", "tcp://c:1"))
	f.Set("b", inst("b", "tcp://b:2"))
	f.Remove("c", ReasonWithdrawn)
	f.Set("b", inst("b", "tcp://b:3"))
	ctx, cancel = context.WithCancel(t.Context())
	wg.Add(1)
	go func() { defer wg.Done(); f.Run(ctx) }()
	check(next(), Added, ReasonNone, "b", "tcp://b:3")
	// c was pending before d: had it produced an event, it would come now.
	f.Set("d", inst("d", "tcp://d:1"))
	check(next(), Added, ReasonNone, "d", "tcp://d:1")
	cancel()
	wg.Wait()
	if _, ok := <-f.Events(); ok {
		t.Fatal("events channel open after Run returned")
	}
}
