package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/cmd/fastmq/internal/records"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/spool"
)

// twoPublishers starts two in-process publishers of "jobs" in one mesh,
// each with n records "pubI-J", and returns them and the gossip address
// to join.
func twoPublishers(t *testing.T, dir string, n int) ([]*fastmq.Node, string) {
	t.Helper()
	gossip := freePort(t)
	var pubs []*fastmq.Node
	for i := 0; i < 2; i++ {
		cfg := fastmq.Config{Name: fmt.Sprintf("pub%d", i), DataDir: filepath.Join(dir, fmt.Sprintf("pub%d", i))}
		if i == 0 {
			cfg.GossipAddr = gossip
		} else {
			cfg.Seeds = []string{gossip}
		}
		node, err := fastmq.New(cfg)
		// The free port found may be taken by another test before gossip
		// binds it: take another, a few times.
		for try := 0; i == 0 && err != nil && (errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")) && try < 5; try++ {
			gossip = freePort(t)
			cfg.GossipAddr = gossip
			node, err = fastmq.New(cfg)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { node.Close() })
		recs := make([]spool.Record, n)
		for j := range recs {
			recs[j].Value = fmt.Appendf(nil, "pub%d-%d", i, j)
		}
		if _, err := node.Append(context.Background(), "jobs", recs...); err != nil {
			t.Fatal(err)
		}
		pubs = append(pubs, node)
	}
	return pubs, gossip
}

// rowsOf parses the table group ls, info and seek print: a map from
// "stream/group/publisher" to the row's fields by column name.
func rowsOf(t *testing.T, lines []string) map[string]map[string]string {
	t.Helper()
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "STREAM") {
		t.Fatalf("no table: %q", lines)
	}
	cols := []string{"stream", "group", "publisher", "floor", "cursor", "end", "lag", "lag_time", "pending", "in_flight",
		"members", "delivered", "redelivered", "acked", "naked", "expired", "dead"}
	out := map[string]map[string]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != len(cols) {
			t.Fatalf("row %q: %d fields, want %d", l, len(f), len(cols))
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = f[i]
		}
		out[f[0]+"/"+f[1]+"/"+f[2]] = row
	}
	return out
}

// TestCLIGroupAdmin runs a group's life from the command line against two
// publishers: `consume --group --exec` acknowledges what the command
// accepts and dead-letters what it keeps failing; `group ls` shows the
// group on both publishers with its counts; `dlq ls` lists the dead
// letters with their headers; `dlq replay` gives them back to the group
// once (a second replay replays nothing and says so), which reads them
// again at their own offsets; `group seek --to earliest` makes the group
// read the stream again.
func TestCLIGroupAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	const n = 10
	dir := t.TempDir()
	pubs, gossip := twoPublishers(t, dir, n)
	cli := func(name string, args ...string) *cliProc {
		return startCLI(t, append(args, "--data", filepath.Join(dir, name), "--join", gossip)...)
	}
	stat := func(i int) group.GroupStats {
		for _, g := range pubs[i].Status().Groups {
			if g.Stream == "jobs" && g.Group == "workers" {
				return g
			}
		}
		return group.GroupStats{}
	}

	// Records ending in 3 or 7 fail every time: after two deliveries
	// they are dead letters.
	w := cli("w1", "consume", "--stream", "jobs", "--group", "workers", "--max-deliver", "2",
		"--exec", `v=$(cat); case "$v" in *3|*7) exit 1;; esac; echo "done $v"`)
	testutil.WaitFor(t, "8 acknowledged and 2 dead-lettered on each publisher", 60*time.Second, func() bool {
		for i := range pubs {
			if st := stat(i); st.Floor != n || st.Acked != n-2 || st.DeadLettered != 2 {
				return false
			}
		}
		return true
	})
	w.kill9()

	rows := rowsOf(t, cli("ls", "group", "ls").mustSucceed())
	for i := range pubs {
		r := rows[fmt.Sprintf("jobs/workers/pub%d", i)]
		if r == nil || r["floor"] != "10" || r["acked"] != "8" || r["dead"] != "2" || r["lag"] != "0" || r["naked"] != "4" || r["redelivered"] != "2" {
			t.Fatalf("group ls row of pub%d: %v (all: %v)", i, r, rows)
		}
	}
	if len(rows) != 2 {
		t.Fatalf("group ls: %d rows, want 2: %v", len(rows), rows)
	}

	lines := cli("dl", "dlq", "ls", "--stream", "jobs", "--group", "workers").mustSucceed()
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "PUBLISHER") {
		t.Fatalf("dlq ls: %q", lines)
	}
	var got []string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		// PUBLISHER DLQ-OFFSET OFFSET DELIVERIES REASON(2 words) HEADERS VALUE
		// HISTORY LAST-REASON (the command's error: 3 words)
		if len(f) != 12 || f[3] != "2" || f[4]+" "+f[5] != "max deliveries" {
			t.Fatalf("dlq ls line %q", l)
		}
		if f[8] != "1:nak,2:nak" || strings.Join(f[9:], " ") != "exit status 1" {
			t.Fatalf("dlq ls line %q: history and last reason, want 1:nak,2:nak and exit status 1", l)
		}
		got = append(got, f[0]+":"+f[2]+":"+f[7])
	}
	sort.Strings(got)
	if want := "pub0:3:pub0-3 pub0:7:pub0-7 pub1:3:pub1-3 pub1:7:pub1-7"; strings.Join(got, " ") != want {
		t.Fatalf("dead letters %v, want %s", got, want)
	}
	// --json: each dead letter whole, in the one record shape of --json.
	got = got[:0]
	for _, l := range cli("dj", "dlq", "ls", "--stream", "jobs", "--group", "workers", "--json").mustSucceed() {
		var r records.JSONRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("dlq ls --json line %q: %v", l, err)
		}
		reason := ""
		for _, h := range r.Headers {
			if h.Key == group.HeaderDLQReason {
				reason = h.Value
			}
		}
		if r.Stream != group.DLQStream("jobs", "workers") || reason != "max deliveries" || r.ID != "" {
			t.Fatalf("dlq ls --json line %q", l)
		}
		got = append(got, r.Publisher+":"+r.Value)
	}
	sort.Strings(got)
	if want := "pub0:pub0-3 pub0:pub0-7 pub1:pub1-3 pub1:pub1-7"; strings.Join(got, " ") != want {
		t.Fatalf("dlq ls --json: %v, want %s", got, want)
	}

	out := strings.Join(cli("r1", "dlq", "replay", "--stream", "jobs", "--group", "workers").mustSucceed(), "\n")
	for i := range pubs {
		if want := fmt.Sprintf("pub%d: replayed 2 dead letters [0, 2) to group workers (their records, at their own offsets); skipped 0", i); !strings.Contains(out, want) {
			t.Fatalf("dlq replay printed:\n%s\nwant %q", out, want)
		}
	}
	out = strings.Join(cli("r2", "dlq", "replay", "--stream", "jobs", "--group", "workers").mustSucceed(), "\n")
	for i := range pubs {
		if want := fmt.Sprintf("pub%d: replayed 0 dead letters [0, 2) to group workers (their records, at their own offsets); skipped 2", i); !strings.Contains(out, want) {
			t.Fatalf("second dlq replay printed:\n%s\nwant %q", out, want)
		}
		// Given back to the group, not appended to the stream.
		if next := pubs[i].Status().Streams[0].Next; next != n {
			t.Fatalf("pub%d's jobs ends at %d after two replays, want %d", i, next, n)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			// What each publisher's group state says, to tell a record
			// leased and never handed out from one never leased.
			for i := range pubs {
				t.Logf("pub%d group state: %+v", i, stat(i))
			}
		}
	})
	// The group gets the replayed records again, once: 3 and 7 of each.
	seen := map[string]int{}
	for _, l := range cli("w2", "consume", "--stream", "jobs", "--group", "workers", "--count", "4").mustSucceed() {
		seen[l]++
	}
	if got := fmt.Sprint(seen); got != "map[pub0-3:1 pub0-7:1 pub1-3:1 pub1-7:1]" {
		t.Fatalf("the group after the replay read %s", got)
	}

	rows = rowsOf(t, cli("s", "group", "seek", "--stream", "jobs", "--group", "workers", "--to", "earliest").mustSucceed())
	for i := range pubs {
		if r := rows[fmt.Sprintf("jobs/workers/pub%d", i)]; r == nil || r["floor"] != "0" || r["lag"] != "10" || r["pending"] != "0" {
			t.Fatalf("group seek row of pub%d: %v", i, r)
		}
	}
	// The group reads everything again: the 10 records of each
	// publisher, once.
	c := cli("w3", "consume", "--stream", "jobs", "--group", "workers", "--count", "20")
	seen = map[string]int{}
	for _, l := range c.mustSucceed() {
		seen[l]++
	}
	for i := range pubs {
		for j := 0; j < n; j++ {
			if v := fmt.Sprintf("pub%d-%d", i, j); seen[v] != 1 {
				t.Errorf("%s read %d times after the seek, want 1", v, seen[v])
			}
		}
	}
	rows = rowsOf(t, cli("i", "group", "info", "--stream", "jobs", "--group", "workers").mustSucceed())
	for i := range pubs {
		if r := rows[fmt.Sprintf("jobs/workers/pub%d", i)]; r == nil || r["floor"] != "10" || r["lag"] != "0" {
			t.Fatalf("group info row of pub%d: %v", i, r)
		}
	}
	// A group no publisher knows: each row says so, and the exit is not 0.
	lines = cli("u", "group", "info", "--stream", "jobs", "--group", "nosuchgroup").mustFail("the query failed on 2 of 2 publishers")
	if n := strings.Count(strings.Join(lines, "\n"), "unknown group nosuchgroup"); n != 2 {
		t.Fatalf("group info of an unknown group printed %q", lines)
	}
	// Its dead letters: not an empty list, which would say it has none.
	cli("ud", "dlq", "ls", "--stream", "jobs", "--group", "nosuchgroup").mustFail("no publisher of stream jobs knows group nosuchgroup")
	cli("ur", "dlq", "replay", "--stream", "jobs", "--group", "nosuchgroup").mustFail("no publisher of stream jobs knows group nosuchgroup")
	cli("up", "dlq", "ls", "--stream", "jobs", "--group", "nosuchgroup", "--publisher", "pub1").mustFail("publisher pub1 does not know group nosuchgroup of stream jobs")
	cli("ul", "dlq", "ls", "--stream", "jobs", "--group", "workers", "--limit", "0").mustFail("--limit 0: want at least 1")
	// A group with no dead letters lists none, and succeeds.
	cli("o", "consume", "--stream", "jobs", "--group", "other", "--count", "1").mustSucceed()
	if lines := cli("od", "dlq", "ls", "--stream", "jobs", "--group", "other").mustSucceed(); len(lines) != 1 || !strings.HasPrefix(lines[0], "PUBLISHER") {
		t.Fatalf("dlq ls of a group with no dead letters printed %q, want the header alone", lines)
	}
	if out := strings.Join(cli("or", "dlq", "replay", "--stream", "jobs", "--group", "other").mustSucceed(), "\n"); !strings.Contains(out, ": no dead letters") {
		t.Fatalf("dlq replay of a group with no dead letters printed %q", out)
	}
}
