package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startServe runs `fastmq serve` as node name (joining join, if set) and
// returns it with its gossip address.
func startServe(t *testing.T, dir, name, service, execLine string, join string, extra ...string) (*cliProc, string) {
	t.Helper()
	args := []string{"serve", service, "--exec", execLine, "--name", name, "--data", filepath.Join(dir, name)}
	if join != "" {
		args = append(args, "--join", join)
	}
	p := startCLI(t, append(args, extra...)...)
	p.boundEndpoint()
	f := strings.Fields(p.line()) // serving SERVICE node NAME gossip ADDR endpoint EP
	if len(f) != 8 || f[0] != "serving" || f[4] != "gossip" {
		t.Fatalf("serve printed %q", f)
	}
	return p, f[5]
}

// serve runs the command per request: stdin the request, stdout the reply,
// a failing exit a remote error with its stderr; call prints replies in
// order, reports failed calls and exits non-zero after them.
func TestServeCallCLI(t *testing.T) {
	dir := t.TempDir()
	srv, gossip := startServe(t, dir, "s1", "upper",
		`req=$(cat); if [ "$req" = fail ]; then echo "cannot $req" >&2; exit 3; fi; printf '%s:' "$FASTMQ_NODE"; printf '%s' "$req" | tr a-z A-Z`,
		"", "--concurrency", "2")
	c := startCLI(t, "call", "upper", "--join", gossip, "--name", "c1", "--data", filepath.Join(dir, "c1"), "--timeout", "5s")
	c.feed("hello", "fail", "world")
	c.closeStdin()
	lines := c.mustFail("some calls failed: 1")
	wantOut(t, "call", lines, "s1:HELLO", "s1:WORLD")
	if e := c.stderr(); !strings.Contains(e, "exit-3: cannot fail") {
		t.Fatalf("call's stderr lacks the remote error:\n%s", e)
	}
	if e := c.stderr(); strings.Contains(e, "level=INFO") {
		t.Fatalf("call's stderr, for its errors, has its node's INFO logs:\n%s", e)
	}
	srv.cmd.Process.Signal(interrupt)
	srv.mustSucceed()
}

// serve drains on SIGTERM: the request it runs finishes and is answered.
func TestServeDrainsOnSignal(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "started")
	fifo := filepath.Join(dir, "go")
	mkfifo(t, fifo)
	srv, gossip := startServe(t, dir, "s1", "slow", fmt.Sprintf(`touch %s; read x < %s; echo done`, marker, fifo), "")
	c := startCLI(t, "call", "slow", "--join", gossip, "--name", "c1", "--data", filepath.Join(dir, "c1"), "--timeout", "20s")
	c.feed("x")
	waitFile(t, marker)
	srv.cmd.Process.Signal(interrupt)
	waitStderr(t, srv, "rpc server draining")
	release(t, fifo)
	if l := c.line(); l != "done" {
		t.Fatalf("call printed %q", l)
	}
	c.closeStdin()
	c.mustSucceed()
	srv.mustSucceed()
}

// A request whose deadline passes stops the command with everything it
// started (its process group): nothing of it runs on after the caller
// was told the call failed.
func TestServeDeadlineStopsTheCommandsChildren(t *testing.T) {
	dir := t.TempDir()
	side := filepath.Join(dir, "side")
	srv, gossip := startServe(t, dir, "s1", "pipe", `tr a-z A-Z | (sleep 2; cat >> `+side+`)`, "")
	c := startCLI(t, "call", "pipe", "--join", gossip, "--name", "c1", "--data", filepath.Join(dir, "c1"), "--timeout", "1s")
	c.feed("charge-card-42")
	c.closeStdin()
	c.mustFail("deadline exceeded")
	time.Sleep(3 * time.Second) // past the pipeline's sleep
	if b, err := os.ReadFile(side); err == nil {
		t.Fatalf("the command's pipeline ran on after the deadline: %q", b)
	}
	srv.cmd.Process.Signal(interrupt)
	srv.mustSucceed()
}

// serve refuses flags it cannot honour before the node starts.
func TestServeFlagsCLI(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurrency", "1000000000"}, "--concurrency 1000000000: want 0 (the default, 64) to 65536"},
		{[]string{"--concurrency", "-1"}, "--concurrency -1"},
		{[]string{"--drain", "-5s"}, "--drain -5s: must not be negative"},
	} {
		args := append([]string{"serve", "svc", "--exec", "cat", "--name", "s", "--data", filepath.Join(dir, "s")}, c.args...)
		startCLI(t, args...).mustFail(c.want)
	}
}

// A second serve under a name a live node holds stops gossiping (nobody
// would find it) and exits non-zero saying so, instead of running on
// unreachable.
func TestServeNameTakenCLI(t *testing.T) {
	dir := t.TempDir()
	first, gossip := startServe(t, dir, "s1", "svc", "cat", "")
	second := startCLI(t, "serve", "svc", "--exec", "cat", "--name", "s1", "--data", filepath.Join(dir, "s1b"), "--join", gossip)
	second.mustFail("name taken")
	first.cmd.Process.Signal(interrupt)
	first.mustSucceed()
}
