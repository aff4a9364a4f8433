package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fastmq/fastmq/cmd/fastmq/internal/demo"
	"github.com/fastmq/fastmq/internal/testutil"
)

func TestDemoLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a mesh for several seconds")
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := demo.Run(ctx, demo.Options{Duration: 6 * time.Second, Rate: 2000, Dir: t.TempDir(), ChildEnv: []string{cliEnv + "=1"}}, &out)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{"kill -9 shipper-2", "restarted the collector", "duplicates 0, lost 0"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out.String())
		}
	}
	// The live table follows the collector's position files: a drain
	// that times out means it could not read them.
	if strings.Contains(out.String(), "drain timed out") {
		t.Fatalf("the demo's drain timed out:\n%s", out.String())
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func (p *cliProc) kill9() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// TestShipCollectSurvivesKills follows a growing log with `fastmq ship`,
// collects it with `fastmq collect`, kills each with SIGKILL mid-run and
// restarts it, and checks that the collected file holds every line exactly
// once, in order.
func TestShipCollectSurvivesKills(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "app.log")
	out := filepath.Join(dir, "out")
	gossip := freePort(t)
	ship := func() *cliProc {
		return startCLI(t, "ship", "--name", "web-1", "--data", filepath.Join(dir, "ship"), "--gossip", gossip,
			"--stream", "logs", "--file", logPath)
	}
	collect := func() *cliProc {
		return startCLI(t, "collect", "--name", "collector", "--data", filepath.Join(dir, "collect"),
			"--join", gossip, "--stream", "logs", "--out", out)
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	written := 0
	write := func(n int) {
		w := bufio.NewWriter(f)
		for i := 0; i < n; i++ {
			fmt.Fprintf(w, "line %d of the access log\n", written)
			written++
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	collected := func() int {
		b, _ := os.ReadFile(filepath.Join(out, "web-1.log"))
		return bytes.Count(b, []byte("\n"))
	}
	waitCollected := func(n int) {
		t.Helper()
		testutil.WaitFor(t, fmt.Sprintf("%d lines collected", n), 60*time.Second, func() bool { return collected() >= n })
	}

	s, c := ship(), collect()
	write(5000)
	waitCollected(2000)
	s.kill9() // mid-stream, possibly between an append and its commit
	write(3000)
	s = ship()
	waitCollected(6000)
	c.kill9()
	write(3000)
	c = collect()
	waitCollected(written)
	s.kill9()
	c.kill9()

	b, err := os.ReadFile(filepath.Join(out, "web-1.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != written {
		t.Fatalf("collected %d lines, wrote %d", len(lines), written)
	}
	for i, l := range lines {
		if want := fmt.Sprintf("line %d of the access log", i); l != want {
			t.Fatalf("line %d is %q, want %q", i, l, want)
		}
	}
}

func TestCLIPublishConsume(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	gossip := freePort(t)
	pub := startCLI(t, "publish", "--name", "pub-1", "--data", filepath.Join(dir, "pub"), "--gossip", gossip, "--stream", "events", "--ack")
	pub.feed("alpha", "beta", "gamma")
	for i := 0; i < 3; i++ {
		if got := pub.line(); got != fmt.Sprint(i) {
			t.Fatalf("ack %d: got %q", i, got)
		}
	}
	cons := startCLI(t, "consume", "--data", filepath.Join(dir, "cons"), "--join", gossip, "--stream", "events", "--name", "reader", "--count", "3", "--json")
	out, err := cons.wait()
	if err != nil {
		t.Fatalf("consume: %v\n%s", err, cons.stderr())
	}
	if len(out) != 3 {
		t.Fatalf("consume printed %q", out)
	}
	for i, want := range []string{"alpha", "beta", "gamma"} {
		for _, part := range []string{`"publisher":"pub-1"`, fmt.Sprintf(`"offset":%d`, i), fmt.Sprintf(`"value":"%s"`, want)} {
			if !strings.Contains(out[i], part) {
				t.Fatalf("record %d %q lacks %s", i, out[i], part)
			}
		}
	}
	// The same consumer name resumes after its commit: nothing is left.
	pub.feed("delta")
	if got := pub.line(); got != "3" {
		t.Fatalf("ack 3: got %q", got)
	}
	cons = startCLI(t, "consume", "--data", filepath.Join(dir, "cons"), "--join", gossip, "--stream", "events", "--name", "reader", "--count", "1")
	if out, err := cons.wait(); err != nil || len(out) != 1 || out[0] != "delta" {
		t.Fatalf("resumed consumer printed %q, %v", out, err)
	}
}

func TestCLINodeCommandsRejectNonsense(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"consume", "--data", dir, "--name", "c"}, "--stream is required"},
		{[]string{"consume", "--data", dir, "--stream", "s"}, "--name (a consumer's name) or --group (a consumer group's) is required"},
		{[]string{"consume", "--data", dir, "--stream", "s", "--name", "c", "--from", "yesterday"}, "--from"},
		{[]string{"consume", "--data", dir, "--stream", "s", "--group", "g", "--from", "yesterday"}, "want earliest, latest, an offset or an RFC 3339 time"},
		{[]string{"group", "seek", "--data", dir, "--stream", "s", "--group", "g", "--to", "yesterday"}, "--to"},
		{[]string{"publish", "--data", dir, "--stream", "s", "--key", "not base64!"}, "--key"},
		{[]string{"publish", "--data", dir, "--stream", "s", "--key", "AAAA"}, "want 16, 24 or 32"},
		{[]string{"publish", "--data", dir, "--stream", "s", "--gossip", "nowhere"}, "--gossip"},
		{[]string{"publish", "--data", dir, "--stream", "../x"}, "fastmq: bad stream name"},
		{[]string{"publish", "--data", dir, "--stream", "s", "--sync", "sometimes"}, "--sync"},
		{[]string{"ship", "--data", dir, "--stream", "s"}, "--file"},
		{[]string{"collect", "--data", dir, "--stream", "s"}, "--out"},
		{[]string{"demo", "--duration", "-1s"}, "--duration"},
		{[]string{"publish", "--data", dir, "--stream", "s", "--retention-age", "-1h"}, "--retention-age"},
		{[]string{"publish", "--data", dir, "--stream", "s", "--retention-bytes", "-5"}, "--retention-bytes"},
		{[]string{"publish", "--data", dir, "--stream", "s", "--gossip-advertise", "nowhere"}, "--gossip-advertise"},
		// Gossip beyond loopback without a key (0.0.0.0 binds nothing
		// but this host's own interfaces).
		{[]string{"publish", "--data", dir, "--stream", "s", "--gossip", "0.0.0.0:0"}, "without an encryption key"},
		{[]string{"gossip", "--name", "g", "--gossip", "0.0.0.0:0"}, "without an encryption key"},
		{[]string{"push", "--connect", "tcp://127.0.0.1:1", "--timeout", "-1s"}, "--timeout"},
		{[]string{"push", "--connect", "tcp://127.0.0.1:1", "--linger", "-1s"}, "--linger"},
	}
	for _, tc := range cases {
		p := startCLI(t, tc.args...)
		p.closeStdin()
		if _, err := p.wait(); err == nil {
			t.Fatalf("%v succeeded", tc.args)
		}
		if !strings.Contains(p.stderr(), tc.want) {
			t.Fatalf("%v: stderr %q lacks %q", tc.args, p.stderr(), tc.want)
		}
		if strings.Contains(p.stderr(), "fastmq: fastmq:") {
			t.Fatalf("%v: doubled prefix in %q", tc.args, p.stderr())
		}
	}
}

// TestCLIPublishStopsOnInterrupt checks that SIGINT stops publish cleanly
// while its stdin is still open.
func TestCLIPublishStopsOnInterrupt(t *testing.T) {
	dir := t.TempDir()
	p := startCLI(t, "publish", "--name", "p", "--data", dir, "--stream", "s", "--ack")
	p.feed("one")
	if got := p.line(); got != "0" {
		t.Fatalf("ack: %q", got)
	}
	p.cmd.Process.Signal(os.Interrupt)
	if _, err := p.wait(); err != nil {
		t.Fatalf("publish after SIGINT: %v\n%s", err, p.stderr())
	}
}

// TestCLIAgentsAndMembers runs two agents, lists the mesh with members,
// and stops one agent with SIGTERM: it leaves gracefully and exits 0.
func TestCLIAgentsAndMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	g1, g2 := freePort(t), freePort(t)
	a1 := startCLI(t, "agent", "--name", "a1", "--data", filepath.Join(dir, "a1"), "--gossip", g1)
	if got := a1.line(); !strings.HasPrefix(got, "node a1 gossip "+g1) {
		t.Fatalf("agent a1 said %q", got)
	}
	a2 := startCLI(t, "agent", "--name", "a2", "--data", filepath.Join(dir, "a2"), "--gossip", g2, "--join", g1)
	if got := a2.line(); !strings.HasPrefix(got, "node a2") {
		t.Fatalf("agent a2 said %q", got)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := strings.Join(startCLI(t, "members", "--join", g1).mustSucceed(), "\n")
		if strings.Contains(out, "a1\t"+g1+"\talive") && strings.Contains(out, "a2\t"+g2+"\talive") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("members never listed both agents alive:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	a2.cmd.Process.Signal(syscall.SIGTERM)
	if _, err := a2.wait(); err != nil {
		t.Fatalf("agent a2 after SIGTERM: %v\n%s", err, a2.stderr())
	}
	if !strings.Contains(a2.stderr(), "left cluster") {
		t.Fatalf("agent a2 did not leave gracefully:\n%s", a2.stderr())
	}
	a1.cmd.Process.Signal(syscall.SIGTERM)
	if _, err := a1.wait(); err != nil {
		t.Fatalf("agent a1 after SIGTERM: %v", err)
	}
	bad := startCLI(t, "members", "--join", g1, "--key", "AAAA")
	if _, err := bad.wait(); err == nil {
		t.Fatal("members with a nonsense key succeeded")
	}
}

func TestCLIVersion(t *testing.T) {
	out := startCLI(t, "--version").mustSucceed()
	if len(out) != 1 || !strings.HasPrefix(out[0], "fastmq version ") || !strings.Contains(out[0], "go1.") {
		t.Fatalf("--version printed %q", out)
	}
}
