package discovery

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/hashicorp/serf/serf"

	"github.com/fastmq/fastmq/internal/testutil"
)

// TestAskMembersDeparted proves that a node joining after one member left
// and another failed lists both, by asking the members that saw it: its
// own view has neither.
func TestAskMembersDeparted(t *testing.T) {
	skipShort(t)
	nodes := cluster(t, 4, nil)
	testutil.WaitFor(t, "4 nodes converge", waitLong, func() bool { return converged(nodes, 4) })
	seed := nodes[0].GossipAddr()
	obs := newNode(t, "observer-old", func(c *Config) { c.Seeds = []string{seed}; c.Tags = map[string]string{"obs": "1"} })
	if err := nodes[2].Advertise(Service{Name: "jobs", Kind: "PULL", Endpoints: []string{"tcp://127.0.0.1:5557"}}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the service gossiped", waitLong, func() bool { return len(nodes[0].Lookup("jobs")) == 1 })
	left, failed := nodes[2].Name(), nodes[3].Name()
	if err := nodes[2].Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	nodes[3].Close()
	obs.Leave(t.Context())
	testutil.WaitFor(t, "the departures seen", waitLong, func() bool {
		return statusOfMember(nodes[0], left) == StatusLeft && statusOfMember(nodes[0], failed) == StatusFailed &&
			statusOfMember(nodes[1], failed) == StatusFailed && statusOfMember(nodes[0], "observer-old") == StatusLeft
	})

	late := newNode(t, "late", func(c *Config) { c.Seeds = []string{seed} })
	for _, m := range late.Members() {
		if m.Name == left || m.Name == failed {
			t.Fatalf("the late node's own view has %s (%v): the test proves nothing", m.Name, m.Status)
		}
	}
	rep, err := late.AskMembers(t.Context(), MembersQuery{ExcludeTag: "obs"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rep.Responders, ","); got != strings.Join([]string{"late", nodes[0].Name(), nodes[1].Name()}, ",") {
		t.Errorf("responders %s", got)
	}
	if len(rep.Incomplete)+len(rep.Stripped) != 0 {
		t.Errorf("incomplete %v, stripped %v", rep.Incomplete, rep.Stripped)
	}
	got := map[string]Member{}
	for _, m := range rep.Merge(late.Members()) {
		got[m.Name] = m
	}
	if len(got) != 5 || got[left].Status != StatusLeft || got[failed].Status != StatusFailed ||
		got[nodes[0].Name()].Status != StatusAlive || got["late"].Status != StatusAlive {
		t.Fatalf("merged members: %+v", got)
	}
	if s := got[left].Services; len(s) != 1 || s[0].Name != "jobs" || s[0].Endpoints[0] != "tcp://127.0.0.1:5557" {
		t.Errorf("the left member's services: %+v", s)
	}
	if got[left].Identity == "" || got[left].Addr != nodes[2].GossipAddr() {
		t.Errorf("the left member: %+v", got[left])
	}
	if _, ok := got["observer-old"]; ok {
		t.Error("the member tagged obs was not excluded")
	}
	// Without the exclusion the responders list the observer too.
	rep, err = late.AskMembers(t.Context(), MembersQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Departed) != 3 {
		t.Errorf("departed without exclusion: %+v", rep.Departed)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := late.AskMembers(ctx, MembersQuery{}); !errors.Is(err, context.Canceled) {
		t.Errorf("AskMembers with a cancelled context: %v", err)
	}
	late.Close()
	if _, err := late.AskMembers(t.Context(), MembersQuery{}); !errors.Is(err, ErrClosed) {
		t.Errorf("AskMembers after Close: %v", err)
	}
}

// TestAskMembersPages proves that departed members whose tags fill an
// answer each come back over several answers (serf refuses an answer over
// its size limit), and that one too large even alone comes back stripped
// and reported so.
func TestAskMembersPages(t *testing.T) {
	skipShort(t)
	long := strings.Repeat("r", 250) // the responder's name counts against the limit
	resp := newNode(t, long, nil)
	seed := resp.GossipAddr()
	const n = 5
	var gone []*Membership
	for i := range n {
		name := "gone-" + itoa(i)
		if i == 0 {
			name = strings.Repeat("g", 250) // too large with its tags
		}
		gone = append(gone, newNode(t, name, func(c *Config) {
			c.Seeds = []string{seed}
			c.Tags = map[string]string{"pad": strings.Repeat("p", 420)}
		}))
	}
	testutil.WaitFor(t, "the nodes converge", waitLong, func() bool { return aliveCount(resp) == n+1 })
	for _, g := range gone {
		if err := g.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "the leaves seen", waitLong, func() bool { return aliveCount(resp) == 1 })

	late := newNode(t, "late", func(c *Config) { c.Seeds = []string{seed} })
	rep, err := late.AskMembers(t.Context(), MembersQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Departed) != n || len(rep.Incomplete) != 0 {
		t.Fatalf("departed %d (want %d), incomplete %v", len(rep.Departed), n, rep.Incomplete)
	}
	if len(rep.Stripped) != 1 || rep.Stripped[0] != gone[0].Name() {
		t.Errorf("stripped %v, want the long-named member", rep.Stripped)
	}
	for _, d := range rep.Departed {
		if d.Status != StatusLeft {
			t.Errorf("%s: %v", d.Name, d.Status)
		}
		if d.Name != gone[0].Name() && len(d.Tags["pad"]) != 420 {
			t.Errorf("%s lost its tags: %v", d.Name, d.Tags)
		}
	}
}

// TestMembersWire checks the members query's codec: the request and an
// answer round-trip, an answer stays within its budget and pages on, and
// malformed messages are errors, never panics.
func TestMembersWire(t *testing.T) {
	req := membersRequest{mask: departedMask, exclude: "fastmq-observer", after: "node-b"}
	back, err := decodeMembersRequest(req.encode())
	if err != nil || back != req {
		t.Fatalf("request round trip: %+v, %v", back, err)
	}
	var mems []serf.Member
	for _, name := range []string{"node-a", "node-b", "node-c", "node-d", "node-e", "node-f"} {
		mems = append(mems, serf.Member{Name: name, Addr: net.IPv4(127, 0, 0, 1), Port: 7946, Status: serf.StatusLeft,
			Tags: map[string]string{"zone": "eu", "~i": "abcdef"}})
	}
	mems = append(mems, serf.Member{Name: "node-g", Addr: net.IPv4(127, 0, 0, 1), Port: 7947, Status: serf.StatusAlive})
	mems[4].Tags["fastmq-observer"] = "1"
	mems[5].Status = serf.StatusFailed
	ans := answerMembers(req, mems, 80)
	if len(ans) > 80 {
		t.Fatalf("answer of %d bytes over a budget of 80", len(ans))
	}
	p, err := decodeMembersPage(ans)
	if err != nil || !p.more || len(p.members) != 1 || p.members[0].name != "node-c" || p.members[0].tags["zone"] != "eu" {
		t.Fatalf("first page: %+v, %v", p, err)
	}
	req.after = "node-c"
	p, err = decodeMembersPage(answerMembers(req, mems, 1000))
	if err != nil || p.more || len(p.members) != 2 || p.members[0].name != "node-d" || p.members[1].status != StatusFailed {
		t.Fatalf("last page (node-e excluded, node-g alive): %+v, %v", p, err)
	}
	if p.members[0].addr != "127.0.0.1:7946" {
		t.Errorf("addr %q", p.members[0].addr)
	}
	p, err = decodeMembersPage(answerMembers(membersRequest{mask: departedMask}, mems, 40))
	if err != nil || !p.more || len(p.members) != 1 || !p.members[0].stripped || p.members[0].tags != nil {
		t.Fatalf("a member too large alone: %+v, %v", p, err)
	}
	for _, bad := range [][]byte{nil, {2, 0}, {1}, {1, 0, 5, 'a'}, {1, 0, 1, 'a', 0, 9, 0, 0}, {1, 0, 1, 'a', 0, 3, 0, 200}} {
		if _, err := decodeMembersPage(bad); !errors.Is(err, errMembersWire) {
			t.Errorf("answer %v: %v", bad, err)
		}
		if _, err := decodeMembersRequest(bad); !errors.Is(err, errMembersWire) {
			t.Errorf("request %v: %v", bad, err)
		}
	}
}
