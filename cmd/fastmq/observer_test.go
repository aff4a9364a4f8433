package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIAdminCommandsObserve: group ls, group info and dlq ls run
// without --data, and the short-lived nodes they join the mesh with are
// listed nowhere afterwards (members, asked over gossip, and the agent's
// console), alive, left or failed.
func TestCLIAdminCommandsObserve(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	g1, h1 := freePort(t), freePort(t)
	startAckedPublisher(t, 3, "--name", "p1", "--data", filepath.Join(dir, "p1"), "--gossip", g1, "--stream", "orders", "--ack", "--http", h1)
	if got := len(startCLI(t, "consume", "--node-name", "w1", "--data", filepath.Join(dir, "w1"), "--join", g1,
		"--stream", "orders", "--group", "shipping", "--count", "1").mustSucceed()); got != 1 {
		t.Fatalf("the group member printed %d records, want 1", got)
	}
	for i := 0; i < 3; i++ {
		out := strings.Join(startCLI(t, "group", "ls", "--join", g1).mustSucceed(), "\n")
		if !containsRow(out, "orders", "shipping", "p1") {
			t.Fatalf("group ls without --data:\n%s", out)
		}
	}
	startCLI(t, "group", "info", "--join", g1, "--stream", "orders", "--group", "shipping").mustSucceed()
	startCLI(t, "dlq", "ls", "--join", g1, "--stream", "orders", "--group", "shipping").mustSucceed()

	members := strings.Join(startCLI(t, "members", "--join", g1).mustSucceed(), "\n")
	viaAgent := strings.Join(startCLI(t, "members", "--http", h1).mustSucceed(), "\n")
	status := strings.Join(startCLI(t, "status", "--http", h1).mustSucceed(), "\n")
	for what, out := range map[string]string{"members --join": members, "members --http": viaAgent, "status": status} {
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) == 0 {
				continue
			}
			if name := f[0]; strings.HasPrefix(name, "group-") || strings.HasPrefix(name, "dlq-") || strings.HasPrefix(name, hostnameOr("x")+"-") {
				t.Errorf("%s lists an admin command's node: %q", what, l)
			}
		}
	}
	if !strings.Contains(members, "p1\t") || !strings.Contains(members, "w1\t") {
		t.Errorf("members --join lacks the real members:\n%s", members)
	}
}
