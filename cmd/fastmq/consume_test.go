package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// TestCLIConsumeKillLoopWhilePublishing proves `fastmq consume` commits
// only what its output took, with a publisher writing all along: 30
// SIGKILLs at random moments (some while lines wait in its buffers) and a
// last run, and every appended record was printed at least once.
func TestCLIConsumeKillLoopWhilePublishing(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	const cycles, perTick = 30, 40 // 40 records every 10 ms: 4,000 records/s
	dir := t.TempDir()
	gossip := freePort(t)
	pub, err := fastmq.New(fastmq.Config{Name: "pub", DataDir: filepath.Join(dir, "pub"), GossipAddr: gossip})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	pctx, stopPub := context.WithCancel(context.Background())
	appended := make(chan int, 1)
	go func() {
		n := 0
		defer func() { appended <- n }()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			recs := make([]spool.Record, perTick)
			for i := range recs {
				recs[i].Value = fmt.Appendf(nil, "rec-%08d", n+i)
			}
			if _, err := pub.Append(context.Background(), "events", recs...); err != nil {
				t.Errorf("append: %v", err)
				return
			}
			n += perTick
		}
	}()
	seen := make(map[int]int)
	take := func(l string) {
		var n int
		if _, err := fmt.Sscanf(l, "rec-%08d", &n); err != nil || len(l) != len("rec-00000000") {
			t.Fatalf("a line that is no whole record reached the output: %q", l)
		}
		seen[n]++
	}
	args := []string{"consume", "--data", filepath.Join(dir, "cons"), "--join", gossip, "--stream", "events", "--name", "reader"}
	rng := rand.New(rand.NewPCG(1, 2))
	for cycle := 0; cycle < cycles; cycle++ {
		p := startCLI(t, args...)
		// Most runs outlive a commit (once a second), so that most kills
		// come after one: a kill before the first only prints again.
		run := time.After(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
		stall := cycle%3 == 2 // stop reading a while before the kill: lines wait in the pipe and the command's buffer
		for reading := true; reading; {
			select {
			case l, ok := <-p.out:
				if !ok {
					t.Fatalf("consume exited: %v\n%s", p.err, p.stderr())
				}
				take(l)
			case <-run:
				reading = false
			}
		}
		if stall {
			time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
		}
		p.cmd.Process.Signal(syscall.SIGKILL)
		for l := range p.out {
			take(l)
		}
		<-p.done
	}
	stopPub()
	total := <-appended
	p := startCLI(t, args...)
	deadline := time.After(30 * time.Second)
	for len(seen) < total {
		select {
		case l, ok := <-p.out:
			if !ok {
				t.Fatalf("consume exited: %v\n%s", p.err, p.stderr())
			}
			take(l)
		case <-deadline:
			var lost []int
			for i := 0; i < total; i++ {
				if seen[i] == 0 {
					lost = append(lost, i)
				}
			}
			t.Fatalf("%d of %d appended records never printed after %d kills: %v", len(lost), total, cycles, lost[:min(len(lost), 20)])
		}
	}
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	t.Logf("%d records, each printed at least once; %d printed again after a kill", total, dups)
}

// TestCLIConsumeFinishesCutLine proves a consume appending to a file whose
// last line a kill cut (a write to a file can stop between two pages)
// starts on a line of its own: the records it prints again are whole
// lines, not glued to the cut one.
func TestCLIConsumeFinishesCutLine(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	gossip := freePort(t)
	pub, err := fastmq.New(fastmq.Config{Name: "pub", DataDir: filepath.Join(dir, "pub"), GossipAddr: gossip})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if _, err := pub.Append(context.Background(), "events", spool.Record{Value: []byte("rec-000000")}, spool.Record{Value: []byte("rec-000001")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, mode, value string }{{"name", "--name", "r"}, {"group", "--group", "g"}} {
		t.Run(tc.name, func(t *testing.T) {
			name := filepath.Join(dir, tc.name+".txt")
			if err := os.WriteFile(name, []byte("rec-000000\nrec-0"), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, exe, "consume", "--data", filepath.Join(dir, "cons-"+tc.name), "--join", gossip, "--stream", "events", tc.mode, tc.value, "--count", "2")
			cmd.Env = append(os.Environ(), cliEnv+"=1")
			cmd.Stdout = f
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("consume: %v\n%s", err, stderr.String())
			}
			got, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if want := "rec-000000\nrec-0\nrec-000000\nrec-000001\n"; string(got) != want {
				t.Fatalf("the output file holds %q, want %q", got, want)
			}
		})
	}
}
