package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/console"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/pull"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// agent is one node of a test mesh with its console on a real HTTP server.
type agent struct {
	node *fastmq.Node
	con  *console.Console
	srv  *httptest.Server
}

func (a *agent) url(path string) string { return a.srv.URL + path }

// startAgent starts a node on loopback with its console served and its
// HTTP address advertised, as "fastmq agent --http" does.
func startAgent(t testing.TB, name string, seeds ...string) *agent {
	t.Helper()
	n, err := fastmq.New(fastmq.Config{Name: name, DataDir: filepath.Join(t.TempDir(), name), Seeds: seeds})
	if err != nil {
		t.Fatalf("start node %s: %v", name, err)
	}
	c, err := console.New(console.Config{Node: n, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	if err := n.AdvertiseHTTP(srv.Listener.Addr().String()); err != nil {
		t.Fatal(err)
	}
	a := &agent{node: n, con: c, srv: srv}
	t.Cleanup(func() {
		srv.Close()
		c.Close()
		n.Close()
	})
	return a
}

// startMesh starts n agents joined to the first, and waits until the first
// sees all of them with their HTTP address.
func startMesh(t testing.TB, names ...string) []*agent {
	t.Helper()
	as := []*agent{startAgent(t, names[0])}
	for _, n := range names[1:] {
		as = append(as, startAgent(t, n, as[0].node.GossipAddr()))
	}
	for _, a := range as {
		testutil.WaitFor(t, a.node.Name()+" to see every http address", 0, func() bool {
			st := a.node.Status()
			count := 0
			for _, m := range st.Members {
				if m.HTTP != "" && m.Status == "alive" {
					count++
				}
			}
			return count == len(names)
		})
	}
	return as
}

func publishN(t *testing.T, n *fastmq.Node, stream string, from, count int) {
	t.Helper()
	for i := from; i < from+count; i++ {
		if _, err := n.Publish(context.Background(), stream, []byte(fmt.Sprintf("%s-%d", n.Name(), i))); err != nil {
			t.Fatal(err)
		}
	}
}

// consumeN consumes count records and acknowledges them.
func consumeN(t *testing.T, c *pull.Consumer, count int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < count; i++ {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("consume record %d: %v", i, err)
		}
		c.Ack(m)
	}
}

func getJSON(t *testing.T, u string, v any) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v in %q", u, err, b)
	}
	return resp.StatusCode
}

func member(v console.View, name string) (console.MeshMember, bool) {
	for _, m := range v.Mesh.Members {
		if m.Name == name {
			return m, true
		}
	}
	return console.MeshMember{}, false
}

func consumerLag(v console.View, node, consumer, publisher string) (pull.PublisherStats, bool) {
	m, ok := member(v, node)
	if !ok || m.State == nil {
		return pull.PublisherStats{}, false
	}
	for _, c := range m.State.Consumers {
		if c.Name != consumer {
			continue
		}
		for _, p := range c.Publishers {
			if p.Publisher == publisher {
				return p, true
			}
		}
	}
	return pull.PublisherStats{}, false
}

// TestConsoleMeshView: any agent's /api/mesh shows every member with its
// own status (streams with sizes and disk, consumers with lag), and a
// peek through one agent reads another's records, by offset and by time.
func TestConsoleMeshView(t *testing.T) {
	as := startMesh(t, "alpha", "beta", "gamma")
	alpha, beta, gamma := as[0], as[1], as[2]
	publishN(t, alpha.node, "orders", 0, 30)
	publishN(t, beta.node, "orders", 0, 10)
	c, err := gamma.node.Consume(fastmq.ConsumerConfig{Stream: "orders", Name: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	consumeN(t, c, 12)

	var v console.View
	testutil.WaitFor(t, "beta's console to show the whole mesh", 0, func() bool {
		if code := getJSON(t, beta.url("/api/mesh"), &v); code != http.StatusOK {
			t.Fatalf("/api/mesh: %d", code)
		}
		if len(v.Mesh.Members) != 3 {
			return false
		}
		for _, m := range v.Mesh.Members {
			if m.State == nil || m.Status != "alive" || m.Down {
				return false
			}
		}
		pa, okA := consumerLag(v, "gamma", "billing", "alpha")
		_, okB := consumerLag(v, "gamma", "billing", "beta")
		return okA && okB && pa.High == 30
	})
	if v.Mesh.Node != "beta" {
		t.Errorf("gathered by %q, want beta", v.Mesh.Node)
	}
	a, _ := member(v, "alpha")
	if a.SpoolEndpoint == "" || a.HTTP == "" || len(a.Streams) != 1 || a.Streams[0] != "orders" {
		t.Errorf("alpha's gossip view: %+v", a.MemberStatus)
	}
	if len(a.State.Streams) != 1 {
		t.Fatalf("alpha's streams: %+v", a.State.Streams)
	}
	s := a.State.Streams[0]
	if s.Name != "orders" || s.Oldest != 0 || s.Next != 30 || s.Bytes <= 0 || s.NewestTime.IsZero() {
		t.Errorf("alpha's stream: %+v", s)
	}
	if d := a.State.Disk; d.TotalBytes == 0 || d.FreeBytes == 0 || d.SpoolBytes != s.Bytes || d.Error != "" {
		t.Errorf("alpha's disk: %+v", d)
	}
	pa, _ := consumerLag(v, "gamma", "billing", "alpha")
	pb, _ := consumerLag(v, "gamma", "billing", "beta")
	if got := pa.Acked + pb.Acked; got != 12 {
		t.Errorf("acked %d+%d, want 12 in all", pa.Acked, pb.Acked)
	}

	// Peek at alpha's records through beta's console, a page at a time.
	var page console.PeekPage
	if code := getJSON(t, beta.url("/api/peek?node=alpha&stream=orders&from=5&limit=10"), &page); code != http.StatusOK {
		t.Fatalf("peek: %d %+v", code, page)
	}
	if page.Node != "alpha" || page.From != 5 || page.Next != 15 || len(page.Records) != 10 {
		t.Fatalf("peek page: %+v", page)
	}
	for i, r := range page.Records {
		if want := fmt.Sprintf("alpha-%d", 5+i); r.Value != want || r.Offset != uint64(5+i) {
			t.Errorf("record %d: %+v, want %q", i, r, want)
		}
	}
	ts := page.Records[0].Time.Format(time.RFC3339Nano)
	if code := getJSON(t, beta.url("/api/peek?node=alpha&stream=orders&limit=3&time="+url.QueryEscape(ts)), &page); code != http.StatusOK || len(page.Records) != 3 || page.Records[0].Offset > 5 {
		t.Fatalf("peek by time %s: %d %+v", ts, code, page)
	}
	if code := getJSON(t, alpha.url("/api/peek?stream=orders&from=28"), &page); code != http.StatusOK || len(page.Records) != 2 || page.Next != 30 {
		t.Fatalf("peek at the tail: %d %+v", code, page)
	}
	if code := getJSON(t, alpha.url("/api/peek?stream=nosuch"), &page); code != http.StatusNotFound || !strings.Contains(page.Error, "no such stream") {
		t.Fatalf("peek of a missing stream: %d %+v", code, page)
	}
	if code := getJSON(t, beta.url("/api/peek?node=alpha&stream=nosuch"), &page); code != http.StatusNotFound || page.Node != "alpha" {
		t.Fatalf("peek of a missing stream through beta: %d %+v", code, page)
	}
	if code := getJSON(t, beta.url("/api/peek?node=nobody&stream=orders"), &page); code != http.StatusBadGateway || page.Error == "" {
		t.Fatalf("peek at an unknown node: %d %+v", code, page)
	}
	if alpha.node.Streams()[0] != "orders" || len(alpha.node.Streams()) != 1 {
		t.Errorf("a peek created a stream: %v", alpha.node.Streams())
	}

	// The page and its assets are served.
	for _, p := range []string{"/", "/assets/app.js", "/assets/style.css", "/status", "/metrics"} {
		resp, err := http.Get(alpha.url(p))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", p, resp.Status)
		}
	}
}

// TestConsoleMeshNodeDown: a member whose HTTP server is gone and a member
// killed outright show as down and failed; the others' status is still
// there and the console answers 200.
func TestConsoleMeshNodeDown(t *testing.T) {
	as := startMesh(t, "n1", "n2", "n3", "n4")
	publishN(t, as[0].node, "logs", 0, 5)
	as[2].srv.Close()  // n3: alive in gossip, its HTTP server gone
	as[3].node.Close() // n4: killed, no leave
	var v console.View
	testutil.WaitFor(t, "n4 to show failed and n3 down", 20*time.Second, func() bool {
		if code := getJSON(t, as[1].url("/api/mesh"), &v); code != http.StatusOK {
			t.Fatalf("/api/mesh: %d", code)
		}
		n3, _ := member(v, "n3")
		n4, _ := member(v, "n4")
		return n3.Down && n3.Status == "alive" && n4.Status == "failed" && n4.Down
	})
	n3, _ := member(v, "n3")
	if n3.Error == "" || n3.State != nil {
		t.Errorf("n3: %+v", n3)
	}
	for _, name := range []string{"n1", "n2"} {
		if m, _ := member(v, name); m.State == nil || m.Down {
			t.Errorf("%s: %+v", name, m)
		}
	}
	if n1, _ := member(v, "n1"); n1.State == nil || len(n1.State.Streams) != 1 || n1.State.Streams[0].Next != 5 {
		t.Errorf("n1's streams: %+v", n1.State)
	}
	var s console.View
	if code := getJSON(t, as[0].url("/api/mesh"), &s); code != http.StatusOK {
		t.Fatalf("/api/mesh of n1: %d", code)
	}
}

// TestConsoleLeftAndMissing: a member that left shows as left, and a
// publisher a consumer pulled from that is no member any more shows as
// missing.
func TestConsoleLeftAndMissing(t *testing.T) {
	as := startMesh(t, "m1", "m2")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := as[1].node.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "m2 to show left", 0, func() bool {
		v := as[0].con.Mesh(context.Background())
		m2, ok := member(v, "m2")
		return ok && m2.Status == "left" && m2.Down
	})
}

// TestConsoleRates: appends between gatherings give an append rate and a
// history sample.
func TestConsoleRates(t *testing.T) {
	as := startMesh(t, "r1")
	publishN(t, as[0].node, "s", 0, 1)
	first := as[0].con.Mesh(context.Background())
	publishN(t, as[0].node, "s", 1, 10)
	var v console.View
	testutil.WaitFor(t, "a second gathering", 0, func() bool {
		v = as[0].con.Mesh(context.Background())
		return v.Mesh.Time.After(first.Mesh.Time)
	})
	if r := v.AppendRate["r1/s"]; r <= 0 {
		t.Errorf("append rate %v, want > 0 (%+v)", r, v.AppendRate)
	}
	if len(v.History) != 1 || v.History[0].AppendRate <= 0 || v.History[0].Up != 1 {
		t.Errorf("history: %+v", v.History)
	}
}

// TestConsoleDashboardMetricsExist: every metric the shipped Grafana
// dashboard queries is exported by a node's /metrics.
func TestConsoleDashboardMetricsExist(t *testing.T) {
	dash, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(dash) {
		t.Fatal("the dashboard is no valid JSON")
	}
	as := startMesh(t, "d1")
	publishN(t, as[0].node, "s", 0, 3)
	c, err := as[0].node.Consume(fastmq.ConsumerConfig{Stream: "s", Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	consumeN(t, c, 3)
	// A consumer group, for the fastmq_group_* metrics.
	m, err := as[0].node.Group(fastmq.GroupConfig{Stream: "s", Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := m.Next(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(as[0].url("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`fastmq_[a-z_]+`).FindAllString(string(dash), -1)
	if len(names) < 10 {
		t.Fatalf("the dashboard queries only %v", names)
	}
	for _, n := range names {
		if !regexp.MustCompile(`(?m)^` + n + `[{ ]`).Match(body) {
			t.Errorf("the dashboard queries %s, which /metrics lacks", n)
		}
	}
}
