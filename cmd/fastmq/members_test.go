package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
)

// TestCLIMembersWithoutHTTP proves that `members --join` lists a SIGTERMed
// agent as left and a SIGKILLed one as failed when no agent serves HTTP:
// its observer joins after both departures and never sees them itself, so
// it must ask the agents over gossip.
func TestCLIMembersWithoutHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	g1 := freePort(t)
	a1 := startCLI(t, "agent", "--name", "a1", "--data", filepath.Join(dir, "a1"), "--gossip", g1)
	if got := a1.line(); !strings.HasPrefix(got, "node a1") {
		t.Fatalf("agent a1 said %q", got)
	}
	a2 := startCLI(t, "agent", "--name", "a2", "--data", filepath.Join(dir, "a2"), "--gossip", freePort(t), "--join", g1)
	a3 := startCLI(t, "agent", "--name", "a3", "--data", filepath.Join(dir, "a3"), "--gossip", freePort(t), "--join", g1)
	for _, p := range []*cliProc{a2, a3} {
		if got := p.line(); !strings.HasPrefix(got, "node a") {
			t.Fatalf("agent said %q", got)
		}
	}
	testutil.WaitFor(t, "members to list three alive", 30*time.Second, func() bool {
		got := memberStates(t, "--join", g1)
		return len(got) == 3 && got["a1"] == "alive" && got["a2"] == "alive" && got["a3"] == "alive"
	})

	a3.kill9()
	a2.cmd.Process.Signal(syscall.SIGTERM)
	if _, err := a2.wait(); err != nil {
		t.Fatalf("agent a2 after SIGTERM: %v\n%s", err, a2.stderr())
	}
	testutil.WaitFor(t, "members to show a2 left and a3 failed", 30*time.Second, func() bool {
		got := memberStates(t, "--join", g1)
		return len(got) == 3 && got["a1"] == "alive" && got["a2"] == "left" && got["a3"] == "failed"
	})
	p := startCLI(t, "members", "--join", g1)
	text := strings.Join(p.mustSucceed(), "\n")
	for name, status := range map[string]string{"a1": "alive", "a2": "left", "a3": "failed"} {
		if f := rowOf(text, name); len(f) < 3 || f[2] != status {
			t.Errorf("members printed %q for %s, want status %s:\n%s", f, name, status, text)
		}
	}
	if strings.Contains(p.stderr(), "fastmq members:") {
		t.Errorf("members warned:\n%s", p.stderr())
	}
}

// rowOf returns the tab-separated fields of out's line for name.
func rowOf(out, name string) []string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Split(l, "\t"); f[0] == name {
			return f
		}
	}
	return nil
}
