package discovery

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fastmq/fastmq/internal/testutil"
)

func TestConvergeAndAdvertise(t *testing.T) {
	skipShort(t)
	nodes := cluster(t, 5, nil)
	testutil.WaitFor(t, "5 nodes converge", waitLong, func() bool { return converged(nodes, 5) })

	svc := Service{Name: "jobs", Kind: "PULL", Endpoints: []string{"tcp://127.0.0.1:5557", "ipc:///tmp/jobs.sock"}}
	if err := nodes[2].Advertise(svc); err != nil {
		t.Fatal(err)
	}
	for i, m := range nodes {
		testutil.WaitFor(t, "service seen by "+m.Name(), waitLong, func() bool {
			got := m.Lookup("jobs")
			return len(got) == 1 && got[0].Node == nodes[2].Name() && slices.Equal(got[0].Service.Endpoints, svc.Endpoints) && got[0].Service.Kind == "PULL"
		})
		if i == 2 && m.Lookup("jobs")[0].RTT != 0 {
			t.Errorf("local instance RTT = %v, want 0", m.Lookup("jobs")[0].RTT)
		}
	}
	// Members carries the decoded advertisement.
	testutil.WaitFor(t, "members show service", waitLong, func() bool {
		for _, mem := range nodes[0].Members() {
			if mem.Name == nodes[2].Name() {
				return len(mem.Services) == 1 && mem.Services[0].Name == "jobs"
			}
		}
		return false
	})
	// A watcher nobody reads must not stall gossip: many updates later,
	// Lookup on the same node still sees the latest.
	stalled, err := nodes[0].Watch(t.Context(), "jobs")
	if err != nil {
		t.Fatal(err)
	}
	_ = stalled
	for i := range 50 {
		svc.Endpoints = []string{"tcp://127.0.0.1:" + itoa(30000+i)}
		if err := nodes[2].Advertise(svc); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "latest update despite stalled watcher", waitLong, func() bool {
		got := nodes[0].Lookup("jobs")
		return len(got) == 1 && got[0].Service.Endpoints[0] == "tcp://127.0.0.1:30049"
	})
	// RTT estimates appear from serf coordinates.
	testutil.WaitFor(t, "rtt estimate", waitLong, func() bool {
		got := nodes[0].Lookup("jobs")
		return len(got) == 1 && got[0].RTT > 0
	})
}

func TestWatchLifecycle(t *testing.T) {
	skipShort(t)
	nodes := cluster(t, 3, nil)
	testutil.WaitFor(t, "converge", waitLong, func() bool { return converged(nodes, 3) })
	a, b, c := nodes[0], nodes[1], nodes[2]
	if err := b.Advertise(Service{Name: "api", Kind: "ROUTER", Endpoints: []string{"tcp://127.0.0.1:7000"}}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "api seen", waitLong, func() bool { return len(a.Lookup("api")) == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := a.Watch(ctx, "api")
	if err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, ch, waitLong)
	if ev.Type != Added || ev.Instance.Node != b.Name() {
		t.Fatalf("first event = %+v, want Added from %s", ev, b.Name())
	}

	// Update endpoints.
	if err := b.Advertise(Service{Name: "api", Kind: "ROUTER", Endpoints: []string{"tcp://127.0.0.1:7001"}}); err != nil {
		t.Fatal(err)
	}
	// Under heavy load a node may flap (suspected, refuted); tolerate
	// unrelated events and look for the expected one.
	ev = waitEvent(t, ch, waitLong, func(e Event) bool { return e.Instance.Node == b.Name() && e.Type != Removed })
	if ev.Type != Updated || ev.Instance.Service.Endpoints[0] != "tcp://127.0.0.1:7001" {
		t.Fatalf("got %+v, want Updated to :7001", ev)
	}

	// The local node's own services are watched too.
	if err := a.Advertise(Service{Name: "api", Kind: "ROUTER", Endpoints: []string{"tcp://127.0.0.1:7002"}}); err != nil {
		t.Fatal(err)
	}
	ev = waitEvent(t, ch, waitLong, func(e Event) bool { return e.Instance.Node == a.Name() })
	if ev.Type != Added || ev.Instance.Node != a.Name() {
		t.Fatalf("got %+v, want Added from local node", ev)
	}

	// Withdraw.
	if err := b.Withdraw("api"); err != nil {
		t.Fatal(err)
	}
	ev = waitEvent(t, ch, waitLong, func(e Event) bool { return e.Instance.Node == b.Name() && e.Type == Removed })
	if ev.Type != Removed || ev.Reason != ReasonWithdrawn || ev.Instance.Node != b.Name() {
		t.Fatalf("got %+v, want Removed/withdrawn from %s", ev, b.Name())
	}

	// Failure: c advertises then dies without leaving.
	if err := c.Advertise(Service{Name: "api", Kind: "ROUTER", Endpoints: []string{"tcp://127.0.0.1:7003"}}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ch, waitLong, func(e Event) bool { return e.Type == Added && e.Instance.Node == c.Name() })
	c.Close()
	ev = waitEvent(t, ch, waitLong, func(e Event) bool { return e.Instance.Node == c.Name() })
	if ev.Type != Removed || ev.Reason != ReasonFailed {
		t.Fatalf("got %+v, want Removed/failed", ev)
	}
	testutil.WaitFor(t, "c reported failed", waitLong, func() bool { return statusOfMember(a, c.Name()) == StatusFailed })
	if got := a.Lookup("api"); len(got) != 1 || got[0].Node != a.Name() {
		t.Fatalf("Lookup after failure = %+v, want only local", got)
	}

	// Graceful leave.
	if err := b.Advertise(Service{Name: "api", Kind: "ROUTER", Endpoints: []string{"tcp://127.0.0.1:7004"}}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ch, waitLong, func(e Event) bool { return e.Type == Added && e.Instance.Node == b.Name() })
	lctx, lcancel := context.WithTimeout(context.Background(), waitLong)
	defer lcancel()
	if err := b.Leave(lctx); err != nil {
		t.Fatal(err)
	}
	ev = waitEvent(t, ch, waitLong, func(e Event) bool { return e.Instance.Node == b.Name() })
	if ev.Type != Removed || ev.Reason != ReasonLeft {
		t.Fatalf("got %+v, want Removed/left", ev)
	}
	testutil.WaitFor(t, "b reported left", waitLong, func() bool { return statusOfMember(a, b.Name()) == StatusLeft })

	// Cancelling the context closes the channel.
	cancel()
	for range ch {
	}
}

func TestWatchStream(t *testing.T) {
	skipShort(t)
	nodes := cluster(t, 2, nil)
	testutil.WaitFor(t, "converge", waitLong, func() bool { return converged(nodes, 2) })
	a, b := nodes[0], nodes[1]
	ch, err := a.WatchStream(t.Context(), "audit")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.AdvertiseSpool("tcp://127.0.0.1:6000", []string{"access-log", "audit"}); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, ch, waitLong)
	want := Service{Name: "audit", Kind: SpoolKind, Endpoints: []string{"tcp://127.0.0.1:6000"}}
	if ev.Type != Added || ev.Instance.Node != b.Name() || !sameInstance(ev.Instance, Instance{Addr: b.GossipAddr(), Identity: b.Identity(), Service: want}) {
		t.Fatalf("got %+v, want Added %+v", ev, want)
	}
	if got := a.LookupStream("access-log"); len(got) != 1 || got[0].Service.Endpoints[0] != "tcp://127.0.0.1:6000" {
		t.Fatalf("LookupStream = %+v", got)
	}
	// Dropping the stream from the list withdraws it.
	if err := b.AdvertiseSpool("tcp://127.0.0.1:6000", []string{"access-log"}); err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, ch, waitLong)
	if ev.Type != Removed || ev.Reason != ReasonWithdrawn {
		t.Fatalf("got %+v, want Removed/withdrawn", ev)
	}
	// An empty endpoint withdraws the spool.
	if err := b.AdvertiseSpool("", nil); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "spool withdrawn", waitLong, func() bool { return len(a.LookupStream("access-log")) == 0 })
}

func TestTagsTooLarge(t *testing.T) {
	skipShort(t)
	m := newNode(t, "big", func(c *Config) { c.Tags = map[string]string{"zone": "z1"} })
	small := Service{Name: "small", Kind: "REP", Endpoints: []string{"tcp://127.0.0.1:1"}}
	if err := m.Advertise(small); err != nil {
		t.Fatal(err)
	}
	var eps []string
	for i := range 40 {
		eps = append(eps, "tcp://192.0.2.1:"+itoa(10000+i))
	}
	err := m.Advertise(Service{Name: "huge", Kind: "PUB", Endpoints: eps})
	var tl *TagsTooLargeError
	if !errors.Is(err, ErrTagsTooLarge) || !errors.As(err, &tl) {
		t.Fatalf("Advertise huge: err = %v, want ErrTagsTooLarge", err)
	}
	if tl.Size <= MaxTagsSize || tl.Limit != MaxTagsSize || !strings.Contains(err.Error(), itoa(tl.Size)) {
		t.Fatalf("error %v: size %d limit %d", err, tl.Size, tl.Limit)
	}
	if got := m.Lookup("huge"); len(got) != 0 {
		t.Fatalf("huge service visible after failure: %+v", got)
	}
	if got := m.Lookup("small"); len(got) != 1 {
		t.Fatalf("small service lost: %+v", got)
	}
	mem := m.Members()
	if len(mem) != 1 || len(mem[0].Services) != 1 || mem[0].Tags["zone"] != "z1" {
		t.Fatalf("members = %+v", mem)
	}
	// A spool advertisement whose endpoint alone does not fit fails the
	// same way (a stream list that does not fit is cut: see
	// TestSpoolAdvertisementPartial).
	if err := m.AdvertiseSpool("tcp://127.0.0.1:2/"+strings.Repeat("p", 500), []string{"s"}); !errors.Is(err, ErrTagsTooLarge) {
		t.Fatalf("AdvertiseSpool: %v", err)
	}
	if mem := m.Members(); mem[0].Spool != nil {
		t.Fatalf("spool set after failure: %+v", mem[0].Spool)
	}
	// Too-large user tags are refused by New.
	_, err = New(Config{NodeName: "x", Profile: ProfileLocal, Tags: map[string]string{"k": strings.Repeat("v", 600)}})
	if !errors.Is(err, ErrTagsTooLarge) {
		t.Fatalf("New with huge tags: %v", err)
	}
}

func TestWatchCoalesces(t *testing.T) {
	skipShort(t)
	m := newNode(t, "solo", nil)
	ch, err := m.Watch(t.Context(), "svc")
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads while we publish many updates: the watcher must keep only
	// the latest state, and Advertise must never block on it.
	const n = 200
	for i := range n {
		if err := m.Advertise(Service{Name: "svc", Kind: "REP", Endpoints: []string{"tcp://127.0.0.1:" + itoa(20000+i)}}); err != nil {
			t.Fatal(err)
		}
	}
	last := "tcp://127.0.0.1:" + itoa(20000+n-1)
	var got []Event
	for {
		ev := nextEvent(t, ch, waitLong)
		got = append(got, ev)
		if ev.Instance.Service.Endpoints[0] == last {
			break
		}
	}
	if got[0].Type != Added {
		t.Fatalf("first event %+v, want Added", got[0])
	}
	if len(got) > watcherBuffer+2 {
		t.Fatalf("got %d events for %d updates; want coalescing to at most %d", len(got), n, watcherBuffer+2)
	}
}

func TestValidation(t *testing.T) {
	for _, c := range []Config{
		{},
		{NodeName: "x", Profile: 7},
		{NodeName: "x", BindAddr: "nope"},
		{NodeName: "x", Key: []byte("short")},
		{NodeName: "x", Tags: map[string]string{"~s": "reserved"}},
	} {
		if _, err := New(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", c, err)
		}
	}
	m := newNode(t, "v", nil)
	for _, s := range []Service{
		{Kind: "REP", Endpoints: []string{"tcp://a:1"}},
		{Name: "a|b", Kind: "REP", Endpoints: []string{"tcp://a:1"}},
		{Name: "a", Endpoints: []string{"tcp://a:1"}},
		{Name: "a", Kind: "REP"},
		{Name: "a", Kind: "REP", Endpoints: []string{"tcp://a:1,tcp://b:2"}},
	} {
		if err := m.Advertise(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("Advertise(%+v) = %v, want ErrInvalid", s, err)
		}
	}
	if err := m.AdvertiseSpool("tcp://a:1", []string{"bad stream"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("AdvertiseSpool bad stream: %v", err)
	}
}

func TestClosed(t *testing.T) {
	m := newNode(t, "c", nil)
	ch, err := m.Watch(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, ok := <-ch; ok {
		t.Fatal("watch channel not closed by Close")
	}
	if err := m.Advertise(Service{Name: "a", Kind: "REP", Endpoints: []string{"tcp://a:1"}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Advertise after Close: %v", err)
	}
	if _, err := m.Watch(context.Background(), "x"); !errors.Is(err, ErrClosed) {
		t.Errorf("Watch after Close: %v", err)
	}
	if _, err := m.Join(context.Background(), "127.0.0.1:1"); !errors.Is(err, ErrClosed) {
		t.Errorf("Join after Close: %v", err)
	}
	if err := m.Leave(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Leave after Close: %v", err)
	}
}

func TestJoinUnreachable(t *testing.T) {
	skipShort(t)
	// A port nobody listens on: bind one, note it, close it.
	probe := newNode(t, "probe", nil)
	dead := probe.GossipAddr()
	probe.Close()
	_, err := New(Config{NodeName: "lonely", Profile: ProfileLocal, Seeds: []string{dead}, JoinTimeout: 300 * time.Millisecond, Logger: testLogger()})
	if !errors.Is(err, ErrJoin) {
		t.Fatalf("New with dead seed: %v, want ErrJoin", err)
	}
	// With RetryJoin, New succeeds and joins once the seed appears.
	m := newNode(t, "patient", func(c *Config) { c.Seeds = []string{dead}; c.RetryJoin = true })
	seed := newNode(t, "probe2", func(c *Config) { c.BindAddr = dead })
	testutil.WaitFor(t, "retry join", waitLong, func() bool { return aliveCount(m) == 2 && aliveCount(seed) == 2 })
}

// ownGoroutines counts goroutines running this package's code, other than
// tests.
func ownGoroutines() int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	count := 0
	for g := range strings.SplitSeq(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "fastmq/discovery.(*Membership)") && !strings.Contains(g, "testing.tRunner") {
			count++
		}
	}
	return count
}

func TestCloseJoinsGoroutines(t *testing.T) {
	skipShort(t)
	before := goleak.IgnoreCurrent()
	nodes := cluster(t, 3, func(c *Config) { c.Key = testKey(1) })
	testutil.WaitFor(t, "converge", waitLong, func() bool { return converged(nodes, 3) })
	for _, m := range nodes {
		if _, err := m.Watch(context.Background(), "x"); err != nil { // never cancelled: Close must end it
			t.Fatal(err)
		}
		if _, err := m.WatchStream(context.Background(), "y"); err != nil {
			t.Fatal(err)
		}
		if err := m.Advertise(Service{Name: "x", Kind: "REP", Endpoints: []string{"tcp://127.0.0.1:1"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nodes[0].ListKeys(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := nodes[1].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	nodes[0].Close()
	nodes[2].Close()
	// Everything this package started has been joined when Close returns.
	if n := ownGoroutines(); n != 0 {
		t.Fatalf("%d discovery goroutines still running after Close", n)
	}
	// Close also waited for serf's and memberlist's goroutines: none is left
	// right away (only short timer closures could be, which goleak's
	// retries below cover).
	if n := gossipGoroutines(); n != 0 {
		t.Errorf("%d serf/memberlist goroutines still running right after Close", n)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatal(err)
	}
}

// TestSpoolAdvertisementPartial proves that streams whose names do not all
// fit in the 512-byte gossip tags (four of 128 characters, allowed names)
// still get advertised: the list is cut to what fits and marked partial,
// and a watcher of an unlisted stream sees the node as a candidate to ask.
// Before, AdvertiseSpool failed and an agent with such streams could not
// start.
func TestSpoolAdvertisementPartial(t *testing.T) {
	skipShort(t)
	nodes := cluster(t, 2, nil)
	testutil.WaitFor(t, "converge", waitLong, func() bool { return converged(nodes, 2) })
	a, b := nodes[0], nodes[1]
	var streams []string
	for i := range 4 {
		streams = append(streams, string(rune('a'+i))+strings.Repeat("x", 127))
	}
	if err := b.AdvertiseSpool("tcp://127.0.0.1:6000", streams); err != nil {
		t.Fatalf("AdvertiseSpool of 4 long names: %v", err)
	}
	var ad *SpoolAd
	testutil.WaitFor(t, "the partial advertisement", waitLong, func() bool {
		// Members reads serf's list, LookupStream the view its events
		// keep: wait for both.
		if len(a.LookupStream(streams[0])) == 0 {
			return false
		}
		for _, mem := range a.Members() {
			if mem.Name == b.Name() && mem.Spool != nil {
				ad = mem.Spool
				return true
			}
		}
		return false
	})
	if !ad.Partial || len(ad.Streams) == 0 || len(ad.Streams) >= 4 || !slices.Equal(ad.Streams, streams[:len(ad.Streams)]) {
		t.Fatalf("advertisement seen by a peer = %+v, want a partial prefix of the list", ad)
	}
	for i, st := range streams {
		got := a.LookupStream(st)
		if len(got) != 1 || got[0].Node != b.Name() || got[0].Service.Endpoints[0] != "tcp://127.0.0.1:6000" {
			t.Fatalf("LookupStream(%d) = %+v", i, got)
		}
		if listed := i < len(ad.Streams); got[0].Unlisted == listed {
			t.Fatalf("stream %d: Unlisted = %v, listed = %v", i, got[0].Unlisted, listed)
		}
	}
	// The node itself knows its whole list.
	for _, mem := range b.Members() {
		if mem.Name == b.Name() && (mem.Spool == nil || len(mem.Spool.Streams) != 4 || mem.Spool.Partial) {
			t.Fatalf("own advertisement = %+v, want the whole list", mem.Spool)
		}
	}
	// With fewer streams the list fits again, whole, and is no longer partial.
	if err := b.AdvertiseSpool("tcp://127.0.0.1:6000", streams[:1]); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the whole advertisement", waitLong, func() bool {
		got := a.LookupStream(streams[3])
		return len(got) == 0
	})
	if got := a.LookupStream(streams[0]); len(got) != 1 || got[0].Unlisted {
		t.Fatalf("LookupStream after shrinking = %+v", got)
	}
	// A name holding the partial mark is refused.
	if err := b.AdvertiseSpool("tcp://127.0.0.1:6000", []string{"*"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("stream named *: %v", err)
	}
}
