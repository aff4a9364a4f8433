package main

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
)

// TestCLIGroupExecFailures: a command that fails is logged, its record
// comes back after --backoff (never sooner) and, after --max-deliver
// deliveries, goes to the dead-letter stream, logged too.
func TestCLIGroupExecFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	pubs, gossip := twoPublishers(t, dir, 1)
	runs := filepath.Join(dir, "runs")
	w := startCLI(t, "consume", "--stream", "jobs", "--group", "fails", "--max-deliver", "2", "--backoff", "1500ms",
		"--exec", `v=$(cat); echo "$v $FASTMQ_DELIVERY $(date +%s%N)" >> `+runs+`; exit 3`,
		"--data", filepath.Join(dir, "w"), "--join", gossip)
	testutil.WaitFor(t, "each publisher's record dead-lettered", 60*time.Second, func() bool {
		for _, p := range pubs {
			if groupStatus(p, "jobs", "fails").DeadLettered != 1 {
				return false
			}
		}
		return true
	})
	w.kill9()
	b, err := os.ReadFile(runs)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]int64{} // "value delivery" -> when it ran (ns)
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("runs line %q", l)
		}
		ns, _ := strconv.ParseInt(f[2], 10, 64)
		at[f[0]+" "+f[1]] = ns
	}
	if len(at) != 4 {
		t.Fatalf("runs: %q, want deliveries 1 and 2 of each record", b)
	}
	for _, v := range []string{"pub0-0", "pub1-0"} {
		if gap := time.Duration(at[v+" 2"] - at[v+" 1"]); gap < 1500*time.Millisecond {
			t.Errorf("%s: second delivery %v after the first, want at least the 1.5 s backoff", v, gap)
		}
	}
	errs := w.stderr()
	for _, want := range []string{"command failed: the record is redelivered", "after=1.5s", "exit status 3",
		"command failed: the record goes to the dead-letter stream"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr does not say %q:\n%s", want, errs)
		}
	}
}

// TestCLIGroupExecShutdown: SIGTERM stops a member whose commands are
// running: each command's process group (here a child the shell
// started) is stopped, and the records go back to the group without a
// nak, so that the next member gets them as their second delivery
// instead of the dead-letter stream (--max-deliver 2).
func TestCLIGroupExecShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	pubs, gossip := twoPublishers(t, dir, 1)
	started := filepath.Join(dir, "started")
	w := startCLI(t, "consume", "--stream", "jobs", "--group", "slow", "--max-deliver", "2", "--concurrency", "2",
		"--exec", `v=$(cat); sleep 60 & echo "$v $!" >> `+started+`; wait`,
		"--data", filepath.Join(dir, "w"), "--join", gossip)
	var children []int
	testutil.WaitFor(t, "both records' commands running", 60*time.Second, func() bool {
		b, _ := os.ReadFile(started)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) < 2 {
			return false
		}
		children = children[:0]
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) == 2 {
				pid, _ := strconv.Atoi(f[1])
				children = append(children, pid)
			}
		}
		return len(children) == 2
	})
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the member did not exit on SIGTERM:\n%s", w.stderr())
	}
	for _, pid := range children {
		testutil.WaitFor(t, "the command's child stopped", 10*time.Second, func() bool {
			return syscall.Kill(pid, 0) != nil
		})
	}
	for i, p := range pubs {
		if st := groupStatus(p, "jobs", "slow"); st.Naked != 0 || st.DeadLettered != 0 {
			t.Fatalf("pub%d after the shutdown: %+v, want nothing naked or dead-lettered", i, st)
		}
	}
	second := filepath.Join(dir, "second")
	startCLI(t, "consume", "--stream", "jobs", "--group", "slow", "--max-deliver", "2", "--count", "2",
		"--exec", `v=$(cat); echo "$v $FASTMQ_DELIVERY" >> `+second,
		"--data", filepath.Join(dir, "w2"), "--join", gossip).mustSucceed()
	b, err := os.ReadFile(second)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(b)), "\n")
	sort.Strings(got)
	if strings.Join(got, ",") != "pub0-0 2,pub1-0 2" {
		t.Fatalf("the next member ran %q, want each record's second delivery", got)
	}
}

// TestCLIGroupConsumeFlags: values the group flags cannot mean are
// refused before the node starts, each with the flag's name.
func TestCLIGroupConsumeFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-deliver", "-3"}, "--max-deliver -3: want at least 1, or -1 for unlimited"},
		{[]string{"--max-deliver", "0"}, "--max-deliver 0"},
		{[]string{"--ack-wait", "-5s"}, "--ack-wait -5s"},
		{[]string{"--ack-wait", "2h"}, "--ack-wait 2h0m0s: want more than 0, at most 1h0m0s"},
		{[]string{"--concurrency", "0"}, "--concurrency 0"},
		{[]string{"--backoff", "1s,-2s"}, "--backoff -2s: a delay cannot be negative"},
		{[]string{"--group", "bad group"}, `--group: bad name "bad group"`},
		{[]string{"--group", strings.Repeat("g", 300)}, "--group: bad name"},
	} {
		args := append([]string{"consume", "--stream", "jobs", "--group", "g", "--data", t.TempDir()}, c.args...)
		startCLI(t, args...).mustFail(c.want)
	}
}

// groupStatus returns node's status of stream's group, zero if it has none.
func groupStatus(node *fastmq.Node, stream, grp string) group.GroupStats {
	for _, g := range node.Status().Groups {
		if g.Stream == stream && g.Group == grp {
			return g
		}
	}
	return group.GroupStats{}
}
