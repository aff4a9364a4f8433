package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
)

// `dlq replay --group billing` reaches billing only (issue 31, item 3):
// shipping, which handled the records, does not get them again, the
// stream gets no new record, and billing gets each once, at its own
// offset; replayed again, nothing more. Members are `consume` processes.
// (TestReplayOnlyToItsGroup in package group adds a publisher restart.)
func TestCLIDLQReplayReachesOneGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	const n = 10
	dir := t.TempDir()
	pubs, gossip := twoPublishers(t, dir, n)
	cli := func(name string, args ...string) *cliProc {
		return startCLI(t, append(args, "--data", filepath.Join(dir, name), "--join", gossip)...)
	}
	stat := func(i int, g string) group.GroupStats {
		for _, st := range pubs[i].Status().Groups {
			if st.Stream == "jobs" && st.Group == g {
				return st
			}
		}
		return group.GroupStats{}
	}
	b := cli("b1", "consume", "--stream", "jobs", "--group", "billing", "--max-deliver", "1",
		"--exec", `v=$(cat); case "$v" in *3) exit 1;; esac`)
	seen := map[string]int{}
	for _, l := range cli("s1", "consume", "--stream", "jobs", "--group", "shipping", "--count", "20").mustSucceed() {
		seen[l]++
	}
	testutil.WaitFor(t, "billing: 9 acknowledged and 1 dead letter on each publisher", 60*time.Second, func() bool {
		for i := range pubs {
			if st := stat(i, "billing"); st.Floor != n || st.DeadLettered != 1 {
				return false
			}
		}
		return true
	})
	b.kill9()

	out := strings.Join(cli("r1", "dlq", "replay", "--stream", "jobs", "--group", "billing").mustSucceed(), "\n")
	if strings.Count(out, "replayed 1 dead letters") != 2 {
		t.Fatalf("dlq replay printed %q", out)
	}
	for i := range pubs {
		if next := pubs[i].Status().Streams[0].Next; next != n {
			t.Fatalf("pub%d's stream ends at %d after the replay, want %d: nothing appended", i, next, n)
		}
		if st := stat(i, "shipping"); st.Floor != n || st.Pending != 0 || st.Lag != 0 {
			t.Fatalf("shipping on pub%d after billing's replay: %+v", i, st)
		}
		if st := stat(i, "billing"); st.Floor != 3 || st.Pending != 1 {
			t.Fatalf("billing on pub%d after its replay: floor %d, pending %d; want 3 and 1", i, st.Floor, st.Pending)
		}
	}
	// A replay asked again gives nothing more: the replayed dead letters
	// are in the group's state.
	out = strings.Join(cli("r2", "dlq", "replay", "--stream", "jobs", "--group", "billing").mustSucceed(), "\n")
	if strings.Count(out, "replayed 0 dead letters") != 2 {
		t.Fatalf("second dlq replay printed %q", out)
	}
	got := map[string]int{}
	for _, l := range cli("b2", "consume", "--stream", "jobs", "--group", "billing", "--count", "2").mustSucceed() {
		got[l]++
	}
	if fmt.Sprint(got) != "map[pub0-3:1 pub1-3:1]" {
		t.Fatalf("billing after the replay read %v, want each publisher's record 3 once", got)
	}
	for i := range pubs {
		if st := stat(i, "shipping"); st.Delivered != 0 && st.Redelivered != 0 {
			t.Fatalf("shipping on pub%d had a redelivery: %+v", i, st)
		}
	}
	if len(seen) != 2*n {
		t.Fatalf("shipping read %d records, want %d", len(seen), 2*n)
	}
}
