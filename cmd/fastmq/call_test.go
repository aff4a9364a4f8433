package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
)

const interrupt = syscall.SIGTERM

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// release lets a command blocked reading the fifo go on.
func release(t *testing.T, fifo string) {
	t.Helper()
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("go\n")
	f.Close()
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	testutil.WaitFor(t, path, 0, func() bool { _, err := os.Stat(path); return err == nil })
}

func waitStderr(t *testing.T, p *cliProc, want string) {
	t.Helper()
	testutil.WaitFor(t, "stderr saying "+want, 0, func() bool { return strings.Contains(p.stderr(), want) })
}

// With no instance of the service, call fails at once with a clear error.
func TestCallNoInstanceCLI(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	c := startCLI(t, "call", "nobody", "--name", "c1", "--data", filepath.Join(dir, "c1"), "--wait", "0")
	c.feed("x")
	c.closeStdin()
	c.mustFail("no instance of the service")
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v", d)
	}
}

// Three `fastmq serve` processes under steady calls; one is killed with
// SIGKILL mid-run. With --idempotent every call succeeds within its 2 s
// deadline; without, every call either succeeds or fails with a clear
// error, none hangs. Calls after the kill go to the live instances.
func TestCallFailoverOnSIGKILLCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	for _, idempotent := range []bool{true, false} {
		name := "idempotent"
		if !idempotent {
			name = "plain"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			const echo = `printf '%s:' "$FASTMQ_NODE"; cat`
			s1, seed := startServe(t, dir, "s1", "echo", echo, "")
			s2, _ := startServe(t, dir, "s2", "echo", echo, seed)
			s3, _ := startServe(t, dir, "s3", "echo", echo, seed)
			args := []string{"call", "echo", "--join", seed, "--name", "c1", "--data", filepath.Join(dir, "c1"), "--timeout", "2s"}
			if idempotent {
				args = append(args, "--idempotent")
			}
			c := startCLI(t, args...)
			// Warm up until s2 (the one killed below) and another instance
			// served. With nothing outstanding, routing prefers the
			// instance that answers fastest, so a third may get no warm-up
			// call on a loaded machine; it is not needed for failover.
			seen := map[string]bool{}
			for i := 0; !seen["s2"] || len(seen) < 2; i++ {
				if i > 500 {
					t.Fatalf("calls reached only %v", seen)
				}
				c.feed("warm")
				node, _, _ := strings.Cut(c.line(), ":")
				seen[node] = true
			}
			const total = 300
			for i := range total {
				c.feed("req-" + strconv.Itoa(i))
			}
			c.closeStdin()
			got := map[string]int{}
			var afterKill []string
			for i := 0; ; i++ {
				l, ok := <-c.out
				if !ok {
					break
				}
				node, req, _ := strings.Cut(l, ":")
				if !strings.HasPrefix(req, "req-") {
					t.Fatalf("reply %q", l)
				}
				got[req]++
				if i == 50 {
					s2.kill9()
				}
				if i > 50 {
					afterKill = append(afterKill, node)
				}
			}
			lines, err := c.wait()
			if len(lines) != 0 {
				t.Fatalf("late lines %q", lines)
			}
			errs := strings.Count(c.stderr(), "error: ")
			for req, n := range got {
				if n != 1 {
					t.Fatalf("%s answered %d times", req, n)
				}
			}
			t.Logf("%d replies, %d errors", len(got), errs)
			if len(got)+errs != total {
				t.Fatalf("%d replies + %d errors, want %d calls accounted for:\n%s", len(got), errs, total, c.stderr())
			}
			if idempotent && (errs != 0 || err != nil) {
				t.Fatalf("idempotent calls failed (%v):\n%s", err, c.stderr())
			}
			if !idempotent && errs > 0 && !strings.Contains(c.stderr(), "outcome unknown") {
				t.Fatalf("unclear errors:\n%s", c.stderr())
			}
			// After the kill, s2 may finish at most the calls it held.
			n2 := 0
			for _, node := range afterKill[min(len(afterKill), 5):] {
				if node == "s2" {
					n2++
				}
			}
			if n2 > 0 {
				t.Fatalf("%d calls went to the killed instance", n2)
			}
			for _, p := range []*cliProc{s1, s3} {
				p.cmd.Process.Signal(interrupt)
				p.mustSucceed()
			}
		})
	}
}

// call interrupted while a call waits for its reply, or after a call
// failed, exits non-zero and says so; a bad service name is refused
// before the node starts.
func TestCallInterruptedCLI(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "started")
	fifo := filepath.Join(dir, "go")
	mkfifo(t, fifo)
	srv, gossip := startServe(t, dir, "s1", "work",
		fmt.Sprintf(`r=$(cat); if [ "$r" = bad ]; then echo nope >&2; exit 2; fi; touch %s; read x < %s; echo $r`, marker, fifo), "")
	args := func(name string) []string {
		return []string{"call", "work", "--join", gossip, "--name", name, "--data", filepath.Join(dir, name), "--timeout", "20s"}
	}

	c := startCLI(t, args("c1")...)
	c.feed("slow")
	waitFile(t, marker)
	c.cmd.Process.Signal(interrupt)
	c.mustFail("interrupted while a call waited for its reply")
	release(t, fifo) // let the handler of the abandoned call end

	c = startCLI(t, args("c2")...)
	c.feed("bad")
	waitStderr(t, c, "exit-2: nope")
	c.cmd.Process.Signal(interrupt)
	c.mustFail("some calls failed: 1 (interrupted)")

	for _, bad := range []string{"", "a b"} {
		startCLI(t, "call", bad, "--data", filepath.Join(dir, "x"), "--name", "x").mustFail("service name")
	}
	srv.cmd.Process.Signal(interrupt)
	srv.mustSucceed()
}
