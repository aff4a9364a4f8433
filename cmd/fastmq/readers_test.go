package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastmq/fastmq/internal/testutil"
)

// TestCLIStatusReaders: a plain consumer without --http (a child
// process) is invisible to the console but not to its publisher: status
// lists it in the readers table, by consumer and node, at the position
// of its last fetch.
func TestCLIStatusReaders(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	g1, h1 := freePort(t), freePort(t)
	startAckedPublisher(t, 3, "--name", "p1", "--data", filepath.Join(dir, "p1"), "--gossip", g1, "--stream", "orders", "--ack", "--http", h1)
	cons := startCLI(t, "consume", "--node-name", "c1", "--data", filepath.Join(dir, "c1"), "--join", g1, "--stream", "orders", "--name", "billing")
	for i := 0; i < 3; i++ {
		cons.line()
	}
	var out string
	testutil.WaitFor(t, "status to list c1's billing as p1's reader", 0, func() bool {
		out = strings.Join(startCLI(t, "status", "--http", h1).mustSucceed(), "\n")
		return containsRow(out, "p1", "orders", "billing", "c1")
	})
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 7 && f[0] == "p1" && f[2] == "billing" && (f[5] != "3" || f[6] != "0") {
			t.Errorf("reader row %q: want position 3, lag 0", l)
		}
	}
}
