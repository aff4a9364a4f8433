package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fastmq/fastmq/internal/testutil"
)

// TestCLIStatusDeadPublisher: a publisher (a child process) SIGKILLed for
// good while its group has 15 of 20 records unhandled keeps its stream
// and group rows, their last known lag and "publisher down since" in
// status and in the console's /metrics, until members --forget drops
// them.
func TestCLIStatusDeadPublisher(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	g1, h1 := freePort(t), freePort(t)
	a1 := startCLI(t, "agent", "--name", "a1", "--data", filepath.Join(dir, "a1"), "--gossip", g1, "--http", h1)
	if got := a1.line(); !strings.HasPrefix(got, "node a1") {
		t.Fatalf("agent a1 said %q", got)
	}
	pub := startCLI(t, "publish", "--name", "p1", "--data", filepath.Join(dir, "p1"), "--join", g1, "--stream", "crm", "--ack", "--http", freePort(t))
	for i := 0; i < 20; i++ {
		pub.feed(fmt.Sprintf("rec-%d", i))
		if got := pub.line(); got != fmt.Sprint(i) {
			t.Fatalf("ack %d: %q", i, got)
		}
	}
	if got := len(startCLI(t, "consume", "--node-name", "w1", "--data", filepath.Join(dir, "w1"), "--join", g1,
		"--stream", "crm", "--group", "billing", "--count", "5").mustSucceed()); got != 5 {
		t.Fatalf("the group member printed %d records, want 5", got)
	}
	testutil.WaitFor(t, "status to show the group's lag on p1", 0, func() bool {
		out := strings.Join(startCLI(t, "status", "--http", h1).mustSucceed(), "\n")
		return containsRow(out, "billing", "crm", "p1", "15")
	})

	pub.kill9()
	var out string
	testutil.WaitFor(t, "status to show p1 down with its last known lag", 0, func() bool {
		out = strings.Join(startCLI(t, "status", "--http", h1).mustSucceed(), "\n")
		return strings.Contains(out, "p1 (publisher down since ")
	})
	// The group's row with its last known lag, the stream's with its
	// offsets.
	for _, re := range []string{`(?m)^billing +crm +p1 \(publisher down since \S+\) +15 `,
		`(?m)^crm +p1 \(publisher down since \S+\) +0 +20 +20 `, `(?m)^p1 +(down|failed) .*down since `} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("status lacks a line matching %s:\n%s", re, out)
		}
	}
	metrics := scrape(t, h1)
	for _, want := range []string{`fastmq_publisher_down_since_seconds{publisher="p1"}`,
		`fastmq_down_publisher_group_lag_records{group="billing",publisher="p1",stream="crm"} 15`,
		`fastmq_down_publisher_stream_records{publisher="p1",stream="crm"} 20`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// members --forget: refused for an alive member, then p1 is gone
	// from every view.
	startCLI(t, "members", "--join", g1, "--forget", "a1").mustFail("alive")
	testutil.WaitFor(t, "gossip to find p1 failed", 0, func() bool { return memberStates(t, "--join", g1)["p1"] == "failed" })
	startCLI(t, "members", "--join", g1, "--forget", "p1").mustSucceed()
	testutil.WaitFor(t, "status to drop p1 after --forget", 0, func() bool {
		out = strings.Join(startCLI(t, "status", "--http", h1).mustSucceed(), "\n")
		return !strings.Contains(out, "p1")
	})
	if m := scrape(t, h1); strings.Contains(m, `publisher="p1"`) {
		t.Errorf("/metrics still has p1 after --forget")
	}
}

// scrape gets the /metrics of the agent serving HTTP at addr.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
