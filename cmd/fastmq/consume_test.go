package main

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/spool"
)

// TestCLIConsumeKillLosesNothing proves `fastmq consume` acknowledges only
// what reached its output: a consumer whose reader is slower than it is
// killed with SIGKILL while lines wait in its buffers; after a restart
// under the same name, every record has been printed at least once, and no
// line was ever cut in half. (It used to acknowledge records still in a
// 4 KiB stdout buffer: 456 of 100,000 were lost, and a torn line reached
// the pipe.)
func TestCLIConsumeKillLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	const total = 20000
	dir := t.TempDir()
	gossip := freePort(t)
	pub, err := fastmq.New(fastmq.Config{Name: "pub", DataDir: filepath.Join(dir, "pub"), GossipAddr: gossip})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	recs := make([]spool.Record, total)
	for i := range recs {
		recs[i].Value = fmt.Appendf(nil, "rec-%06d", i)
	}
	if _, err := pub.Append(context.Background(), "events", recs...); err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]int)
	take := func(l string) {
		var n int
		if _, err := fmt.Sscanf(l, "rec-%06d", &n); err != nil || len(l) != len("rec-000000") || n >= total {
			t.Fatalf("a line that is no whole record reached the output: %q", l)
		}
		seen[l]++
	}
	for round := 0; round < 3; round++ {
		p := startCLI(t, "consume", "--data", filepath.Join(dir, "cons"), "--join", gossip, "--stream", "events", "--name", "reader")
		// Read some lines, then stop reading (the pipe and the command's
		// buffers fill) and kill it.
		for i := 0; i < 2000; i++ {
			take(p.line())
		}
		p.cmd.Process.Signal(syscall.SIGKILL)
		for l := range p.out {
			take(l)
		}
		<-p.done
	}
	// A last run prints the rest.
	p := startCLI(t, "consume", "--data", filepath.Join(dir, "cons"), "--join", gossip, "--stream", "events", "--name", "reader")
	deadline := time.After(60 * time.Second)
	for len(seen) < total {
		select {
		case l, ok := <-p.out:
			if !ok {
				t.Fatalf("consume exited: %v\n%s", p.err, p.stderr())
			}
			take(l)
		case <-deadline:
			t.Fatalf("after the kills, %d of %d records ever printed: %d acknowledged records were lost", len(seen), total, total-len(seen))
		}
	}
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	t.Logf("%d records, each printed at least once; %d printed again after a kill", total, dups)
}
