package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/console"
	"github.com/fastmq/fastmq/internal/testutil"
)

// memberStates runs members with args and returns each member's status by
// name, from its JSON output.
func memberStates(t *testing.T, args ...string) map[string]string {
	t.Helper()
	out := startCLI(t, append([]string{"members", "--json"}, args...)...).mustSucceed()
	var ms []fastmq.MemberStatus
	if err := json.Unmarshal([]byte(strings.Join(out, "\n")), &ms); err != nil {
		t.Fatalf("members --json: %v in %q", err, out)
	}
	got := map[string]string{}
	for _, m := range ms {
		got[m.Name] = m.Status
	}
	return got
}

// TestCLIMembersFailedAndLeft runs four agents, one serving HTTP: after a
// SIGKILL members shows the node failed, after a SIGTERM left, both when
// asked through gossip (--join) and of the agent directly (--http), and
// status prints the mesh-wide tables of streams and consumer lag.
func TestCLIMembersFailedAndLeft(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	g1, h1 := freePort(t), freePort(t)
	a1 := startCLI(t, "agent", "--name", "a1", "--data", filepath.Join(dir, "a1"), "--gossip", g1, "--http", h1)
	if got := a1.line(); !strings.HasPrefix(got, "node a1") {
		t.Fatalf("agent a1 said %q", got)
	}
	a2 := startCLI(t, "agent", "--name", "a2", "--data", filepath.Join(dir, "a2"), "--join", g1)
	a3 := startCLI(t, "agent", "--name", "a3", "--data", filepath.Join(dir, "a3"), "--join", g1, "--metrics", freePort(t))
	pub := startCLI(t, "publish", "--name", "p1", "--data", filepath.Join(dir, "p1"), "--join", g1, "--stream", "orders", "--ack", "--http", freePort(t))
	for i := 0; i < 20; i++ {
		pub.feed(fmt.Sprintf("order-%d", i))
		if got := pub.line(); got != fmt.Sprint(i) {
			t.Fatalf("ack %d: %q", i, got)
		}
	}
	cons := startCLI(t, "consume", "--node-name", "c1", "--data", filepath.Join(dir, "c1"), "--join", g1, "--stream", "orders", "--name", "billing", "--http", freePort(t))
	for i := 0; i < 20; i++ {
		if got := cons.line(); got != fmt.Sprintf("order-%d", i) {
			t.Fatalf("consumed %q, want order-%d", got, i)
		}
	}
	for _, p := range []*cliProc{a2, a3} {
		if got := p.line(); !strings.HasPrefix(got, "node a") {
			t.Fatalf("agent said %q", got)
		}
	}
	testutil.WaitFor(t, "members to list five alive", 0, func() bool {
		got := memberStates(t, "--join", g1)
		return len(got) == 5 && got["a1"] == "alive" && got["a2"] == "alive" && got["a3"] == "alive" && got["p1"] == "alive" && got["c1"] == "alive"
	})

	// status: the streams and the consumer's lag across the mesh.
	testutil.WaitFor(t, "status to show the stream and the consumer caught up", 0, func() bool {
		out := strings.Join(startCLI(t, "status", "--join", g1).mustSucceed(), "\n")
		return containsRow(out, "orders", "p1", "0", "20", "20") && containsRow(out, "billing", "c1", "orders", "p1", "0")
	})
	var v console.View
	if err := json.Unmarshal([]byte(strings.Join(startCLI(t, "status", "--http", h1, "--json").mustSucceed(), "\n")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Mesh.Node != "a1" || len(v.Mesh.Members) != 5 {
		t.Fatalf("status --json: %+v", v.Mesh)
	}

	a3.kill9()
	a2.cmd.Process.Signal(syscall.SIGTERM)
	if _, err := a2.wait(); err != nil {
		t.Fatalf("agent a2 after SIGTERM: %v\n%s", err, a2.stderr())
	}
	testutil.WaitFor(t, "members to show a3 failed and a2 left", 0, func() bool {
		got := memberStates(t, "--join", g1)
		return got["a3"] == "failed" && got["a2"] == "left" && got["a1"] == "alive"
	})
	if got := memberStates(t, "--http", h1); got["a3"] != "failed" || got["a2"] != "left" || len(got) != 5 {
		t.Fatalf("members --http: %v", got)
	}
	text := strings.Join(startCLI(t, "members", "--http", h1).mustSucceed(), "\n")
	for _, want := range []string{"a2\t", "\tleft", "a3\t", "\tfailed", "http=" + h1} {
		if !strings.Contains(text, want) {
			t.Errorf("members text lacks %q:\n%s", want, text)
		}
	}
	out := strings.Join(startCLI(t, "status", "--http", h1).mustSucceed(), "\n")
	if !containsRow(out, "a3", "failed") || !containsRow(out, "a2", "left") {
		t.Errorf("status after the kill:\n%s", out)
	}
	bad := startCLI(t, "status", "--http", h1, "--join", g1)
	if _, err := bad.wait(); err == nil {
		t.Error("status with --http and --join succeeded")
	}

	// A consumer group's member processes 15 of the 20 orders: the
	// groups table shows p1's state of the group.
	if got := len(startCLI(t, "consume", "--node-name", "g1", "--data", filepath.Join(dir, "g1"), "--join", g1,
		"--stream", "orders", "--group", "shipping", "--count", "15").mustSucceed()); got != 15 {
		t.Fatalf("the group member printed %d records, want 15", got)
	}
	testutil.WaitFor(t, "status to show the group on p1", 0, func() bool {
		out := strings.Join(startCLI(t, "status", "--http", h1).mustSucceed(), "\n")
		return containsRow(out, "GROUP", "STREAM", "PUBLISHER") && containsRow(out, "shipping", "orders", "p1", "5")
	})
}

// containsRow reports whether a line of out has the fields, in order, as
// its first fields.
func containsRow(out string, fields ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < len(fields) {
			continue
		}
		ok := true
		for i, want := range fields {
			if f[i] != want {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
