package main

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastmq/fastmq/internal/testutil"
)

// TestCLIMembersNamesGroups: a node running a group member (a `consume
// --group` process, idle after the stream's end) is listed by members
// with the stream and group its member serves, not the gossip service's
// raw fastmq-group/GROUP.
func TestCLIMembersNamesGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	g1 := freePort(t)
	startAckedPublisher(t, 3, "--name", "p1", "--data", filepath.Join(dir, "p1"), "--gossip", g1, "--stream", "orders", "--ack")
	w := startCLI(t, "consume", "--node-name", "w1", "--data", filepath.Join(dir, "w1"), "--join", g1, "--stream", "orders", "--group", "shipping")
	for i := 0; i < 3; i++ {
		w.line()
	}
	var out string
	testutil.WaitFor(t, "members to name w1's group", 0, func() bool {
		out = strings.Join(startCLI(t, "members", "--join", g1).mustSucceed(), "\n")
		return strings.Contains(out, "group-member=orders/shipping")
	})
	if strings.Contains(out, "fastmq-group/GROUP") {
		t.Errorf("members still prints the raw service:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "group-member=orders/shipping") && !strings.HasPrefix(l, "w1\t") {
			t.Errorf("group member named on another node: %q", l)
		}
	}
}

// TestCLIMembersNamesGroupsCurve: in a CURVE mesh, members --curve-key
// asks the publishers' spool servers with that key and names a node's
// group members by stream and group (before: it asked without CURVE, got
// no answer and printed group-member=?).
func TestCLIMembersNamesGroupsCurve(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	writeKeys(t, dir, "pub")
	writeKeys(t, dir, "w1")
	writeKeys(t, dir, "obs")
	key := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	g1 := freePort(t)
	startAckedPublisher(t, 3, "--name", "p1", "--data", filepath.Join(dir, "p1"), "--gossip", g1, "--key", key,
		"--curve-key", filepath.Join(dir, "pub.key"), "--stream", "orders", "--ack")
	w := startCLI(t, "consume", "--node-name", "w1", "--data", filepath.Join(dir, "w1"), "--join", g1, "--key", key,
		"--curve-key", filepath.Join(dir, "w1.key"), "--stream", "orders", "--group", "shipping")
	for i := 0; i < 3; i++ {
		w.line()
	}
	var out string
	testutil.WaitFor(t, "members --curve-key to name w1's group", 0, func() bool {
		out = strings.Join(startCLI(t, "members", "--join", g1, "--key", key, "--curve-key", filepath.Join(dir, "obs.key")).mustSucceed(), "\n")
		return strings.Contains(out, "group-member=orders/shipping")
	})
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "group-member=orders/shipping") && !strings.HasPrefix(l, "w1\t") {
			t.Errorf("group member named on another node: %q", l)
		}
	}
	// Without a key the spool servers do not answer: unknown, said so.
	plain := strings.Join(startCLI(t, "members", "--join", g1, "--key", key).mustSucceed(), "\n")
	if !strings.Contains(plain, "group-member=?") {
		t.Errorf("members without --curve-key named groups a CURVE spool server should not have told it:\n%s", plain)
	}
}

// startAckedPublisher starts `fastmq publish --ack` with args, publishes n
// lines order-0 ... order-(n-1) and checks each acknowledgement.
func startAckedPublisher(t *testing.T, n int, args ...string) *cliProc {
	t.Helper()
	pub := startCLI(t, append([]string{"publish"}, args...)...)
	for i := 0; i < n; i++ {
		pub.feed(fmt.Sprintf("order-%d", i))
		if got := pub.line(); got != fmt.Sprint(i) {
			t.Fatalf("ack %d: %q\n%s", i, got, pub.stderr())
		}
	}
	return pub
}
