package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/spool"
)

// TestCLIGroupMemberKill: 2 publishers, 3 `fastmq consume --group`
// processes of one group; one is killed with SIGKILL mid-run. Every
// record is acknowledged once in the publishers' state and printed at
// least once; only records the killed member printed are printed twice
// (its leases), and they come back within gossip's failure detection,
// not the two-minute AckWait.
func TestCLIGroupMemberKill(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	const perPub = 3000
	dir := t.TempDir()
	gossip := freePort(t)
	var pubs []*fastmq.Node
	for i := 0; i < 2; i++ {
		cfg := fastmq.Config{Name: fmt.Sprintf("pub%d", i), DataDir: filepath.Join(dir, fmt.Sprintf("pub%d", i))}
		if i == 0 {
			cfg.GossipAddr = gossip
		} else {
			cfg.Seeds = []string{gossip}
		}
		n, err := fastmq.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		recs := make([]spool.Record, perPub)
		for j := range recs {
			recs[j].Value = fmt.Appendf(nil, "pub%d-%05d", i, j)
		}
		if _, err := n.Append(context.Background(), "jobs", recs...); err != nil {
			t.Fatal(err)
		}
		pubs = append(pubs, n)
	}
	var mu sync.Mutex
	printed := map[string][]int{} // line -> the members that printed it
	var readers sync.WaitGroup
	var procs []*cliProc
	for i := 0; i < 3; i++ {
		p := startCLI(t, "consume", "--data", filepath.Join(dir, fmt.Sprintf("m%d", i)), "--join", gossip,
			"--stream", "jobs", "--group", "workers", "--ack-wait", "2m")
		procs = append(procs, p)
		readers.Add(1)
		go func() {
			defer readers.Done()
			for l := range p.out {
				mu.Lock()
				printed[l] = append(printed[l], i)
				mu.Unlock()
			}
		}()
	}
	count := func(member int) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, ms := range printed {
			for _, m := range ms {
				if m == member {
					n++
				}
			}
		}
		return n
	}
	testutil.WaitFor(t, "the victim at work", 30*time.Second, func() bool { return count(0) >= 300 })
	procs[0].kill9()
	killed := time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range pubs {
				t.Logf("%s: %+v; gossip: %+v", p.Name(), p.GroupStats()["jobs/workers"], p.Membership().Members())
			}
		}
	})
	testutil.WaitFor(t, "every record acknowledged", 110*time.Second, func() bool {
		for _, p := range pubs {
			st := p.GroupStats()["jobs/workers"]
			if st.Acked != perPub || st.Floor != perPub {
				return false
			}
		}
		return true
	})
	took := time.Since(killed)
	for _, p := range procs[1:] {
		p.kill9()
	}
	readers.Wait()
	if took >= 2*time.Minute {
		t.Fatalf("the victim's leases came back after %v: AckWait, not gossip", took)
	}
	redelivered := uint64(0)
	for _, p := range pubs {
		redelivered += p.GroupStats()["jobs/workers"].Redelivered
	}
	twice := 0
	for i := 0; i < 2; i++ {
		for j := 0; j < perPub; j++ {
			l := fmt.Sprintf("pub%d-%05d", i, j)
			ms := printed[l]
			switch {
			case len(ms) == 0:
				t.Fatalf("%s was never printed", l)
			case len(ms) > 2 || (len(ms) == 2 && ms[0] != 0 && ms[1] != 0):
				t.Errorf("%s printed by members %v: only the killed member's records may come twice", l, ms)
			case len(ms) == 2:
				twice++
			}
		}
	}
	if uint64(twice) > redelivered {
		t.Errorf("%d records printed twice, but only %d redelivered", twice, redelivered)
	}
	// group info shows the state of both publishers.
	info := startCLI(t, "group", "info", "--data", filepath.Join(dir, "info"), "--join", gossip, "--stream", "jobs", "--group", "workers")
	var lines []string
	for l := range info.out {
		lines = append(lines, l)
	}
	<-info.done
	if info.err != nil || len(lines) != 3 {
		t.Fatalf("group info: %v\n%s\n%s", info.err, strings.Join(lines, "\n"), info.stderr())
	}
	for _, r := range rowsOf(t, lines) {
		if r["floor"] != fmt.Sprint(perPub) || r["acked"] != fmt.Sprint(perPub) {
			t.Errorf("group info row %v: want floor and acked %d", r, perPub)
		}
	}
	t.Logf("killed member's leases back after %v; %d redelivered, %d printed twice", took.Round(time.Millisecond), redelivered, twice)
}
