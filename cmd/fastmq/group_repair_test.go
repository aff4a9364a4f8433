package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/spool"
)

// `fastmq group repair` on a stopped publisher's data directory moves a
// zeroed journal aside, rebuilds the group from its snapshot and says
// what was lost; the publisher started again serves the group (issue 31,
// item 9).
func TestCLIGroupRepair(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	cfg := fastmq.Config{Name: "pub", DataDir: dir}
	node, err := fastmq.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := node.Append(ctx, "jobs", spool.Record{Value: []byte("a")}, spool.Record{Value: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	m, err := node.Group(fastmq.GroupConfig{Stream: "jobs", Group: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := m.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := msg.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	m.Close()
	node.Close()

	journals, _ := filepath.Glob(filepath.Join(dir, "groups", "jobs", "workers.*.journal"))
	if len(journals) != 1 {
		t.Fatalf("journals %v", journals)
	}
	fi, err := os.Stat(journals[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(journals[0], make([]byte, fi.Size()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := strings.Join(startCLI(t, "group", "repair", "--data", dir, "--stream", "jobs", "--group", "workers").mustSucceed(), "\n")
	for _, want := range []string{"damage:", "quarantined:", "rebuilt:", "lost:"} {
		if !strings.Contains(out, want) {
			t.Fatalf("group repair printed %q, want %q in it", out, want)
		}
	}
	out = strings.Join(startCLI(t, "group", "repair", "--data", dir, "--stream", "jobs", "--group", "workers").mustSucceed(), "\n")
	if !strings.Contains(out, "nothing to repair") {
		t.Fatalf("second repair printed %q", out)
	}
	node, err = fastmq.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if _, err := node.Append(ctx, "jobs", spool.Record{Value: []byte("c")}); err != nil {
		t.Fatal(err)
	}
	m, err = node.Group(fastmq.GroupConfig{Stream: "jobs", Group: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Next(ctx); err != nil {
		t.Fatalf("the group after the repair: %v", err)
	}
	testutil.WaitFor(t, "the group served", 10*time.Second, func() bool {
		st, ok := node.GroupStats()["jobs/workers"]
		return ok && st.Delivered > 0
	})
}
