package pull_test

import (
	"fmt"
	"testing"

	"github.com/fastmq/fastmq/discovery/discoverytest"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// publisherStats returns the consumer's stats of one publisher.
func publisherStats(c *pull.Consumer, name string) (pull.PublisherStats, bool) {
	for _, st := range c.Stats() {
		if st.Publisher == name {
			return st, true
		}
	}
	return pull.PublisherStats{}, false
}

// readFrom reads n messages and checks that they are, per publisher, the
// next offsets after want's, with the values appendN wrote; it advances
// want.
func readFrom(t *testing.T, c *pull.Consumer, n int, want map[string]uint64, prefix map[string]string) {
	t.Helper()
	for i := 0; i < n; i++ {
		m := next(t, c)
		p, ok := prefix[m.Publisher]
		if !ok {
			t.Fatalf("record from unexpected publisher %q", m.Publisher)
		}
		if m.Offset != want[m.Publisher] {
			t.Fatalf("%s: offset %d, want %d", m.Publisher, m.Offset, want[m.Publisher])
		}
		if v := fmt.Sprintf("%s-%d", p, m.Offset); string(m.Value) != v {
			t.Fatalf("%s@%d: value %q, want %q", m.Publisher, m.Offset, m.Value, v)
		}
		want[m.Publisher]++
		c.Ack(m)
	}
}

// TestConsumerFollowsDiscoveredPublishers proves a consumer follows
// discovery: it starts pulling from a publisher when its spool is
// advertised, stops when the publisher fails or withdraws, moves to a new
// endpoint on an update, and resumes where it stopped, with no record lost
// or repeated, when the publisher comes back. Discovery is the in-memory
// fake: gossip is not what this test is about.
func TestConsumerFollowsDiscoveredPublishers(t *testing.T) {
	mesh := discoverytest.NewMesh()
	t.Cleanup(func() { mesh.Close() })
	self, err := mesh.Join("consumer")
	if err != nil {
		t.Fatal(err)
	}
	la := openSpool(t, spool.Config{})
	lb := openSpool(t, spool.Config{})
	sa := startServer(t, map[string]*spool.Log{"logs": la})
	sb := startServer(t, map[string]*spool.Log{"logs": lb})
	sb2 := startServer(t, map[string]*spool.Log{"logs": lb}) // pb's second endpoint
	appendN(t, la, "a", 0, 100)
	appendN(t, lb, "b", 0, 100)

	c := startConsumer(t, pull.ConsumerConfig{Stream: "logs", Discovery: self})
	want := map[string]uint64{}
	prefix := map[string]string{"pa": "a", "pb": "b"}

	// pa advertises its spool: the consumer pulls from it.
	pa, err := mesh.Join("pa")
	if err != nil {
		t.Fatal(err)
	}
	if err := pa.AdvertiseSpool(sa.Endpoints()[0], []string{"other", "logs"}); err != nil {
		t.Fatal(err)
	}
	readFrom(t, c, 100, want, prefix)

	// pb joins: both are pulled.
	pb, err := mesh.Join("pb")
	if err != nil {
		t.Fatal(err)
	}
	if err := pb.AdvertiseSpool(sb.Endpoints()[0], []string{"logs"}); err != nil {
		t.Fatal(err)
	}
	appendN(t, la, "a", 100, 50)
	readFrom(t, c, 150, want, prefix)

	// pa fails: its fetcher stops, and pb is still pulled.
	if err := pa.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "pa's fetcher to stop", 0, func() bool {
		st, ok := publisherStats(c, "pa")
		return ok && !st.Connected
	})
	appendN(t, la, "a", 150, 50) // written while pa is out of the mesh
	appendN(t, lb, "b", 100, 10)
	readFrom(t, c, 10, want, prefix)

	// pa restarts under the same name: the consumer resumes at offset 150.
	pa, err = mesh.Join("pa")
	if err != nil {
		t.Fatal(err)
	}
	if err := pa.AdvertiseSpool(sa.Endpoints()[0], []string{"logs"}); err != nil {
		t.Fatal(err)
	}
	readFrom(t, c, 50, want, prefix)

	// pb moves to another endpoint: the consumer follows the update.
	if err := pb.AdvertiseSpool(sb2.Endpoints()[0], []string{"logs"}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "pb's fetcher on the new endpoint", 0, func() bool {
		st, ok := publisherStats(c, "pb")
		return ok && st.Connected && st.Endpoint == sb2.Endpoints()[0]
	})
	appendN(t, lb, "b", 110, 20)
	readFrom(t, c, 20, want, prefix)

	// pb withdraws the stream (its node stays): its fetcher stops too.
	if err := pb.AdvertiseSpool(sb2.Endpoints()[0], []string{"other"}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "pb's fetcher to stop", 0, func() bool {
		st, ok := publisherStats(c, "pb")
		return ok && !st.Connected
	})
	if want["pa"] != 200 || want["pb"] != 130 {
		t.Fatalf("read up to %v, want pa 200 and pb 130", want)
	}
}
