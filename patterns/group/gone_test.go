package group_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// eventWatcher is a group.ServiceWatcher fed by the test: the MemberService
// events gossip would deliver.
type eventWatcher chan discovery.Event

func (w eventWatcher) Watch(ctx context.Context, name string) (<-chan discovery.Event, error) {
	return w, nil
}

// newWatchedPublisher is newPublisher with a group server that learns of
// gone member nodes from w.
func newWatchedPublisher(t *testing.T, w eventWatcher) *publisher {
	t.Helper()
	p := &publisher{dir: t.TempDir(), logs: map[string]*spool.Log{}}
	lookup := func(s string) (*spool.Log, bool) {
		p.mu.Lock()
		defer p.mu.Unlock()
		l, ok := p.logs[s]
		return l, ok
	}
	srv, err := pull.NewServer(pull.ServerConfig{Lookup: lookup})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := group.NewServer(group.ServerConfig{Dir: filepath.Join(p.dir, "groups"), Lookup: lookup, Open: p.open, Send: srv, Watch: w})
	if err != nil {
		t.Fatal(err)
	}
	if err := group.Register(srv, gs); err != nil {
		t.Fatal(err)
	}
	p.srv, p.groups = srv, gs
	t.Cleanup(p.close)
	return p
}

// lease makes a member on node lease n records and returns them.
func lease(t *testing.T, p *publisher, node string, n int) []*group.Message {
	t.Helper()
	m := member(t, group.MemberConfig{Name: node, AckWait: time.Minute, Buffer: n, MaxAckPending: n}, p)
	var msgs []*group.Message
	for len(msgs) < n {
		msg, err := m.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, msg)
	}
	return msgs
}

func released(p *publisher) uint64 { return p.groups.Stats()["s/g"].Released }

func memberInstance(node, addr string) discovery.Instance {
	return discovery.Instance{Node: node, Addr: addr, Identity: node + "-id", Service: group.MemberServiceOf("tcp://" + addr)}
}

// TestFailedNodeThatRefutesKeepsLeases: gossip declares a live member's
// node failed and a moment later alive again, from the same address (a
// refuted suspicion under load). Its members keep their leases and their
// acks count; a node that stays failed has its leases released.
func TestFailedNodeThatRefutesKeepsLeases(t *testing.T) {
	w := make(eventWatcher, 16)
	p := newWatchedPublisher(t, w)
	p.publish(t, "s", 20)
	live := lease(t, p, "node-a", 2)
	gone := lease(t, p, "node-z", 3)

	a := memberInstance("node-a", "127.0.0.1:7001")
	w <- discovery.Event{Type: discovery.Removed, Reason: discovery.ReasonFailed, Instance: a}
	w <- discovery.Event{Type: discovery.Added, Instance: a}
	// node-z fails for good: its release, after the grace, also shows the
	// events before it were handled.
	w <- discovery.Event{Type: discovery.Removed, Reason: discovery.ReasonFailed, Instance: memberInstance("node-z", "127.0.0.1:7002")}
	testutil.WaitFor(t, "node-z's leases released", 30*time.Second, func() bool { return released(p) >= uint64(len(gone)) })
	if n := released(p); n != uint64(len(gone)) {
		t.Fatalf("%d leases released, want node-z's %d: the refuted node lost its leases", n, len(gone))
	}
	for _, msg := range live {
		if err := msg.Ack(context.Background()); err != nil {
			t.Fatalf("ack of the refuted node's lease: %v", err)
		}
	}
	if st := p.groups.Stats()["s/g"]; st.Acked != uint64(len(live)) {
		t.Fatalf("acked %d, want %d", st.Acked, len(live))
	}
}

// TestFailedNodeBackFromElsewhereReleased: a node declared failed that
// comes back from another address is another process: the leases of the
// failed one are released at once, without waiting for the grace.
func TestFailedNodeBackFromElsewhereReleased(t *testing.T) {
	w := make(eventWatcher, 16)
	p := newWatchedPublisher(t, w)
	p.publish(t, "s", 20)
	held := lease(t, p, "node-a", 2)
	w <- discovery.Event{Type: discovery.Removed, Reason: discovery.ReasonFailed, Instance: memberInstance("node-a", "127.0.0.1:7001")}
	w <- discovery.Event{Type: discovery.Added, Instance: memberInstance("node-a", "127.0.0.1:7003")}
	testutil.WaitFor(t, "the old process's leases released", 30*time.Second, func() bool { return released(p) == uint64(len(held)) })
}

// streamWatcher is a group.StreamWatcher fed by the test.
type streamWatcher chan discovery.Event

func (w streamWatcher) WatchStream(ctx context.Context, stream string) (<-chan discovery.Event, error) {
	return w, nil
}

// TestMemberKeepsLinkToRefutedPublisher: gossip declares a publisher
// failed while the member's fetch waits there, and alive again a moment
// later. The member keeps its link: the record the waiting fetch leases
// reaches it (a link stopped and started again would lose that reply and
// leave the record leased to the member, unseen, until AckWait).
func TestMemberKeepsLinkToRefutedPublisher(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	if _, err := p.open("s"); err != nil {
		t.Fatal(err)
	}
	w := make(streamWatcher, 16)
	pub := discovery.Instance{Node: "p0", Addr: "127.0.0.1:7001", Service: discovery.Service{Name: "s", Kind: discovery.SpoolKind, Endpoints: p.srv.Endpoints()[:1]}}
	w <- discovery.Event{Type: discovery.Added, Instance: pub}
	m, err := group.NewMember(group.MemberConfig{Stream: "s", Group: "g", Name: "a", Discovery: w, AckWait: time.Minute, MaxWait: 30 * time.Second, Buffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	testutil.WaitFor(t, "the member's fetch waiting at the publisher", 30*time.Second, func() bool {
		_, ok := p.groups.Stats()["s/g"] // created by the fetch, which then waits
		return ok
	})
	w <- discovery.Event{Type: discovery.Removed, Reason: discovery.ReasonFailed, Instance: pub}
	w <- discovery.Event{Type: discovery.Added, Instance: pub}
	p.publish(t, "s", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msg, err := m.Next(ctx)
	if err != nil {
		t.Fatalf("the record leased to the member never reached it: %v (%+v)", err, p.groups.Stats()["s/g"])
	}
	if err := msg.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRestartedNodeReleasedAtOnce: a member node is killed and started
// again within FailedGrace from the same gossip address and endpoints,
// so gossip takes it for the same process (a failure, then the node back
// as it was). Its new start has a new incarnation: the publisher releases
// the old start's leases as soon as the new member asks, without waiting
// for AckWait (a minute here).
func TestRestartedNodeReleasedAtOnce(t *testing.T) {
	w := make(eventWatcher, 16)
	p := newWatchedPublisher(t, w)
	p.publish(t, "s", 20)
	cfg := group.MemberConfig{Name: "node-a", Incarnation: "first", AckWait: time.Minute, Buffer: 3, MaxAckPending: 3}
	old := member(t, cfg, p)
	for range 3 {
		if _, err := old.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	old.Close() // killed: its leases stay
	a := memberInstance("node-a", "127.0.0.1:7001")
	w <- discovery.Event{Type: discovery.Removed, Reason: discovery.ReasonFailed, Instance: a}
	w <- discovery.Event{Type: discovery.Added, Instance: a} // back at once, as it was

	cfg.Incarnation = "second"
	cfg.Buffer, cfg.MaxAckPending = 20, 20
	m := member(t, cfg, p)
	seen := map[uint64]bool{}
	for len(seen) < 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		msg, err := m.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%d of 20 records after the restart (released %d): %v", len(seen), released(p), err)
		}
		seen[msg.Offset] = true
		if err := msg.Ack(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := released(p); n != 3 {
		t.Fatalf("released %d leases, want the old start's 3", n)
	}
}

// TestUnnamedMembersKeepLeases: members without a Name, in processes of
// their own (an incarnation each), share no node: a request of one does
// not release the leases of another.
func TestUnnamedMembersKeepLeases(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 10)
	a := member(t, group.MemberConfig{Incarnation: "one", AckWait: time.Minute, Buffer: 1, MaxAckPending: 1}, p)
	msg, err := a.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b := member(t, group.MemberConfig{Incarnation: "two", AckWait: time.Minute, Buffer: 1, MaxAckPending: 1}, p)
	if _, err := b.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := msg.Ack(context.Background()); err != nil {
		t.Fatalf("ack of the first member after the second fetched: %v", err)
	}
	if n := released(p); n != 0 {
		t.Fatalf("released %d leases, want none", n)
	}
}

// Two live processes that use one node name (each member of it with its
// own incarnation) do not release each other's leases: a change of
// incarnation releases only the leases of members whose connection is
// gone (issue 31, item 12: anyone may claim a new incarnation), so a's
// stays, and the old incarnation's next request shows the name is shared.
func TestSharedNodeNameStopsReleasing(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 10)
	cfg := func(inc string) group.MemberConfig {
		return group.MemberConfig{Name: "n", Incarnation: inc, AckWait: time.Minute, Buffer: 1, MaxAckPending: 1}
	}
	a := member(t, cfg("one"), p)
	ma, err := a.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b := member(t, cfg("two"), p)
	mb, err := b.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// b's first request reads as a restart of node n, but a's
	// connection is open: its lease stays.
	if n := released(p); n != 0 {
		t.Fatalf("b's first request released %d of a's leases", n)
	}
	// a speaks again (its ack, a new fetch): the name is shared. b
	// keeps its lease.
	if err := ma.Ack(context.Background()); err != nil {
		t.Fatalf("a's ack: %v", err)
	}
	if _, err := a.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := mb.Ack(context.Background()); err != nil {
		t.Fatalf("ack of the second process's lease after the first spoke again: %v", err)
	}
	if n := released(p); n != 0 {
		t.Fatalf("released %d leases, want none", n)
	}
}
