package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/socket"
)

// cliEnv makes the test binary act as the fastmq command, so the CLI tests
// run the real command in separate processes without a separate build.
const cliEnv = "FASTMQ_TEST_RUN_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// cliProc is one running fastmq command.
type cliProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	out    chan string // stdout lines
	errMu  sync.Mutex
	errBuf bytes.Buffer
	bound  chan string // endpoints from "bound X" lines on stderr
	done   chan struct{}
	err    error
	stdin  io.WriteCloser
}

// startCLI runs fastmq args; stdin is a pipe the test writes to (see
// feed/closeStdin).
func startCLI(t *testing.T, args ...string) *cliProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &cliProc{t: t, out: make(chan string, 1024), bound: make(chan string, 8), done: make(chan struct{})}
	p.cmd = exec.Command(exe, args...)
	p.cmd.Env = append(os.Environ(), cliEnv+"=1")
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.out <- sc.Text()
		}
		close(p.out)
	}()
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if ep, ok := strings.CutPrefix(line, "bound "); ok {
				p.bound <- ep
			}
			p.errMu.Lock()
			p.errBuf.WriteString(line + "\n")
			p.errMu.Unlock()
		}
	}()
	go func() {
		readers.Wait()
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			for range p.out {
			}
			<-p.done
		}
	})
	return p
}

func (p *cliProc) stderr() string {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return p.errBuf.String()
}

// boundEndpoint waits for the command's "bound ENDPOINT" line.
func (p *cliProc) boundEndpoint() string {
	p.t.Helper()
	select {
	case ep := <-p.bound:
		return ep
	case <-p.done:
		p.t.Fatalf("%v exited before binding: %v\n%s", p.cmd.Args[1:], p.err, p.stderr())
	case <-time.After(10 * time.Second):
		p.t.Fatalf("%v did not report its endpoint", p.cmd.Args[1:])
	}
	return ""
}

func (p *cliProc) feed(lines ...string) {
	p.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(p.stdin, l+"\n"); err != nil {
			p.t.Fatalf("write stdin of %v: %v", p.cmd.Args[1:], err)
		}
	}
}

// line returns the next stdout line.
func (p *cliProc) line() string {
	p.t.Helper()
	select {
	case l, ok := <-p.out:
		if ok {
			return l
		}
		<-p.done
		p.t.Fatalf("%v exited: %v\n%s", p.cmd.Args[1:], p.err, p.stderr())
	case <-time.After(15 * time.Second):
		p.t.Fatalf("%v printed nothing", p.cmd.Args[1:])
	}
	return ""
}

func (p *cliProc) closeStdin() { p.stdin.Close() }

func (p *cliProc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// wait waits for the command to exit and returns its stdout lines and exit
// error.
func (p *cliProc) wait() ([]string, error) {
	p.t.Helper()
	var lines []string
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-p.out:
			if !ok {
				<-p.done
				return lines, p.err
			}
			lines = append(lines, l)
		case <-deadline:
			p.t.Fatalf("%v did not exit; stdout so far %q, stderr: %s", p.cmd.Args[1:], lines, p.stderr())
		}
	}
}

// mustSucceed waits for a clean exit and returns the stdout lines.
func (p *cliProc) mustSucceed() []string {
	p.t.Helper()
	lines, err := p.wait()
	if err != nil {
		p.t.Fatalf("%v: %v\nstdout: %q\nstderr: %s", p.cmd.Args[1:], err, lines, p.stderr())
	}
	return lines
}

func wantOut(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s printed %q, want %q", what, got, want)
	}
}

// ipcEP returns an ipc endpoint in a short temporary directory.
func ipcEP(t *testing.T) string {
	t.Helper()
	return "ipc://" + filepath.Join(testutil.ShortDir(t), "s.sock")
}

func TestCLIPushPull(t *testing.T) {
	t.Parallel()
	pull := startCLI(t, "pull", "--bind", "tcp://127.0.0.1:0", "--count", "3", "--timeout", "15s")
	ep := pull.boundEndpoint()
	push := startCLI(t, "push", "--connect", ep)
	push.feed("one", "two words", "three")
	push.closeStdin()
	push.mustSucceed()
	wantOut(t, "pull", pull.mustSucceed(), "one", "two words", "three")
}

func TestCLIReqRepEchoAndExec(t *testing.T) {
	t.Parallel()
	t.Run("echo", func(t *testing.T) {
		t.Parallel()
		ep := ipcEP(t)
		rep := startCLI(t, "rep", "--bind", ep, "--echo", "--count", "2")
		req := startCLI(t, "req", "--connect", ep, "--timeout", "15s")
		req.feed("ping", "pong")
		req.closeStdin()
		wantOut(t, "req", req.mustSucceed(), "ping", "pong")
		rep.mustSucceed()
	})
	t.Run("exec", func(t *testing.T) {
		t.Parallel()
		ep := ipcEP(t)
		rep := startCLI(t, "rep", "--bind", ep, "--exec", "tr a-z A-Z", "--count", "1")
		req := startCLI(t, "req", "--connect", ep, "--count", "1", "--timeout", "15s")
		req.feed("hello world")
		wantOut(t, "req", req.mustSucceed(), "HELLO WORLD")
		rep.mustSucceed()
	})
	t.Run("stdin-replies", func(t *testing.T) {
		t.Parallel()
		ep := ipcEP(t)
		rep := startCLI(t, "rep", "--bind", ep, "--count", "1")
		rep.feed("the answer")
		req := startCLI(t, "req", "--connect", ep, "--count", "1", "--timeout", "15s")
		req.feed("question")
		wantOut(t, "req", req.mustSucceed(), "the answer")
		wantOut(t, "rep", rep.mustSucceed(), "question")
	})
}

func TestCLIPubSubPrefix(t *testing.T) {
	t.Parallel()
	sub := startCLI(t, "sub", "--bind", "tcp://127.0.0.1:0", "--subscribe", "A", "--subscribe", "C", "--count", "4", "--timeout", "15s")
	ep := sub.boundEndpoint()
	pub := startCLI(t, "pub", "--connect", ep)
	// A subscriber only gets what is published after its subscription
	// arrives: keep publishing until it has its four messages.
	for i := 0; sub.running() && i < 100000; i++ {
		if _, err := fmt.Fprintf(pub.stdin, "A-%d\nB-%d\nC-%d\n", i, i, i); err != nil {
			break
		}
		if i%10 == 9 {
			select {
			case <-sub.done:
			case <-time.After(5 * time.Millisecond): // pace the publisher
			}
		}
	}
	got := sub.mustSucceed()
	pub.closeStdin()
	if _, err := pub.wait(); err != nil && !strings.Contains(err.Error(), "signal") {
		t.Logf("pub: %v", err)
	}
	if len(got) != 4 {
		t.Fatalf("sub printed %q, want 4 lines", got)
	}
	for _, l := range got {
		if !strings.HasPrefix(l, "A-") && !strings.HasPrefix(l, "C-") {
			t.Fatalf("sub printed %q, which matches no subscription (all: %q)", l, got)
		}
	}
}

// TestCLIPubNoDrop proves that with --no-drop a publisher waits for a
// subscriber that is full: it floods a subscriber stopped with SIGSTOP with
// more than the kernel's socket buffers hold, sees the publisher report a
// send that waits (--events), resumes the subscriber, and checks that this
// wait began before the subscriber resumed and ended after (the publisher
// was held by the full subscriber, not by a passing queue of one) and that
// every line arrives once, in order.
func TestCLIPubNoDrop(t *testing.T) {
	t.Parallel()
	sub := startCLI(t, "sub", "--bind", "tcp://127.0.0.1:0", "--hwm", "1")
	pub := startCLI(t, "pub", "--connect", sub.boundEndpoint(), "--no-drop", "--hwm", "1", "--linger", "60s", "--events")
	// Slow joiner: the flood starts once the subscription is through.
	warm := false
	for i := 0; i < 500 && !warm; i++ {
		pub.feed("w")
		select {
		case l := <-sub.out:
			warm = l == "w"
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !warm {
		t.Fatal("the subscriber never got a warm-up line")
	}
	if err := sub.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			sub.cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	stopped := len(pub.stderr())
	const n = 20000
	pad := strings.Repeat("x", 1000)
	fed := make(chan error, 1)
	go func() {
		for i := range n {
			if _, err := fmt.Fprintf(pub.stdin, "n-%05d-%s\n", i, pad); err != nil {
				fed <- err
				return
			}
		}
		fed <- nil
		pub.closeStdin()
	}()
	// The stopped subscriber reads nothing: its queue, the kernel's buffers
	// and the publisher's queue fill, and the publisher waits (without
	// --no-drop it would drop instead and report no wait).
	testutil.WaitFor(t, "the publisher to report a send waiting for the stopped subscriber", 30*time.Second, func() bool {
		return strings.Contains(pub.stderr()[stopped:], "event send-wait: a subscriber's queue is full")
	})
	resumedAt := time.Now()
	if err := sub.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	next := 0
	deadline := time.After(60 * time.Second)
	for next < n {
		select {
		case l, ok := <-sub.out:
			if !ok {
				t.Fatalf("sub exited at line %d: %s", next, sub.stderr())
			}
			if l == "w" && next == 0 {
				continue
			}
			if want := fmt.Sprintf("n-%05d-%s", next, pad); l != want {
				t.Fatalf("line %d: got %.12q", next, l)
			}
			next++
		case <-deadline:
			t.Fatalf("only %d of %d lines arrived", next, n)
		}
	}
	if err := <-fed; err != nil {
		t.Fatal(err)
	}
	pub.mustSucceed()
	if !heldAcross(t, pub.stderr()[stopped:], resumedAt) {
		t.Fatalf("no send of the publisher waited from before the subscriber resumed (%s) until after; its reports:\n%s",
			resumedAt.UTC().Format(time.RFC3339Nano), pub.stderr()[stopped:])
	}
}

// heldAcross reports whether the publisher's send-wait reports show a wait
// that began before at and ended after it.
func heldAcross(t *testing.T, reports string, at time.Time) bool {
	t.Helper()
	var began time.Time
	for _, l := range strings.Split(reports, "\n") {
		if s, ok := strings.CutPrefix(l, "event send-wait: a subscriber's queue is full, waiting since "); ok {
			b, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				t.Fatalf("send-wait report %q: %v", l, err)
			}
			began = b
		} else if s, ok := strings.CutPrefix(l, "event send-wait: done after "); ok {
			d, err := time.ParseDuration(s)
			if err != nil {
				t.Fatalf("send-wait report %q: %v", l, err)
			}
			if began.Before(at) && began.Add(d).After(at) {
				return true
			}
		}
	}
	return false
}

func TestCLIRouterDealer(t *testing.T) {
	t.Parallel()
	ep := ipcEP(t)
	router := startCLI(t, "router", "--bind", ep, "--echo", "--count", "2")
	dealer := startCLI(t, "dealer", "--connect", ep, "--identity", "d1", "--count", "2", "--timeout", "15s")
	dealer.feed("m1", "m2")
	wantOut(t, "dealer", dealer.mustSucceed(), "m1", "m2")
	wantOut(t, "router", router.mustSucceed(), "d1\tm1", "d1\tm2")
}

func TestCLIRouterSendsByIdentity(t *testing.T) {
	t.Parallel()
	ep := ipcEP(t)
	router := startCLI(t, "router", "--bind", ep, "--timeout", "15s")
	dealer := startCLI(t, "dealer", "--connect", ep, "--identity", "0xbin", "--count", "1", "--timeout", "15s")
	dealer.feed("hello")
	// "0xbin" is shown as hex so it cannot be mistaken for a hex identity.
	if got := router.line(); got != "0x307862696e\thello" {
		t.Fatalf("router printed %q", got)
	}
	router.feed("0x307862696e\treply to you")
	wantOut(t, "dealer", dealer.mustSucceed(), "reply to you")
}

func TestCLIPair(t *testing.T) {
	t.Parallel()
	ep := ipcEP(t)
	a := startCLI(t, "pair", "--bind", ep, "--echo", "--count", "1")
	b := startCLI(t, "pair", "--connect", ep, "--count", "1", "--timeout", "15s")
	b.feed("hi there")
	wantOut(t, "pair", b.mustSucceed(), "hi there")
	wantOut(t, "pair --echo", a.mustSucceed(), "hi there")
}

// TestCLIMultipart checks TAB splitting with a library socket as the peer.
func TestCLIMultipart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pull, err := socket.New(socket.Pull, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer pull.Close()
	ep, err := pull.Bind("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	push := startCLI(t, "push", "--connect", ep, "--multipart")
	push.feed("a\tb\t\tc", "single")
	push.closeStdin()
	push.mustSucceed()
	for _, want := range [][]string{{"a", "b", "", "c"}, {"single"}} {
		m, err := pull.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(m.Frames))
		for i, f := range m.Frames {
			got[i] = string(f)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
			t.Fatalf("frames %q, want %q", got, want)
		}
	}

	// And the other way: frames printed TAB-separated.
	push2, err := socket.New(socket.Push, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer push2.Close()
	ep2, err := push2.Bind("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cli := startCLI(t, "pull", "--connect", ep2, "--multipart", "--count", "1", "--timeout", "15s")
	if err := push2.Send(ctx, socket.NewMsgString("x", "y z", "")); err != nil {
		t.Fatal(err)
	}
	wantOut(t, "pull --multipart", cli.mustSucceed(), "x\ty z\t")
}

func TestCLITimeout(t *testing.T) {
	t.Parallel()
	ep := ipcEP(t)
	p := startCLI(t, "pull", "--bind", ep, "--timeout", "300ms")
	out, err := p.wait()
	if err == nil {
		t.Fatalf("pull with nothing to receive exited 0 (stdout %q)", out)
	}
	if !strings.Contains(p.stderr(), "timed out after 300ms") {
		t.Fatalf("stderr %q does not say it timed out", p.stderr())
	}
}

func TestCLIPlain(t *testing.T) {
	t.Parallel()
	users := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(users, []byte("# test users\nalice:wonderland\nbob:builder\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ep := ipcEP(t)
	rep := startCLI(t, "rep", "--bind", ep, "--plain-users", users, "--echo", "--count", "1")
	t.Run("wrong-password", func(t *testing.T) {
		req := startCLI(t, "req", "--connect", ep, "--plain-user", "alice", "--plain-pass", "nope", "--timeout", "500ms")
		req.feed("let me in")
		req.closeStdin()
		if out, err := req.wait(); err == nil {
			t.Fatalf("req with a wrong password got a reply: %q", out)
		}
	})
	t.Run("right-password", func(t *testing.T) {
		req := startCLI(t, "req", "--connect", ep, "--plain-user", "bob", "--plain-pass", "builder", "--timeout", "15s")
		req.feed("let me in")
		req.closeStdin()
		wantOut(t, "req", req.mustSucceed(), "let me in")
	})
	rep.mustSucceed()
}

// TestCLIWithLibzmq runs the tools against libzmq peers (pyzmq).
func TestCLIWithLibzmq(t *testing.T) {
	t.Parallel()
	py := testutil.Pyzmq(t)
	script := filepath.Join("..", "..", "socket", "testdata", "interop", "peer.py")
	t.Run("pull-from-libzmq-push", func(t *testing.T) {
		t.Parallel()
		ep := ipcEP(t)
		pull := startCLI(t, "pull", "--bind", ep, "--count", "3", "--timeout", "15s")
		pull.boundEndpoint()
		out, err := exec.Command(py, script, "push", ep, "connect", "--count", "3").CombinedOutput()
		if err != nil {
			t.Fatalf("peer.py: %v: %s", err, out)
		}
		wantOut(t, "pull", pull.mustSucceed(), "msg-0", "msg-1", "msg-2")
	})
	t.Run("req-to-libzmq-rep", func(t *testing.T) {
		t.Parallel()
		ep := ipcEP(t)
		rep := exec.Command(py, script, "rep", ep, "bind", "--count", "2")
		var repOut bytes.Buffer
		rep.Stdout = &repOut
		rep.Stderr = &repOut
		if err := rep.Start(); err != nil {
			t.Fatal(err)
		}
		req := startCLI(t, "req", "--connect", ep, "--multipart", "--timeout", "15s")
		req.feed("a\tb", "c")
		req.closeStdin()
		wantOut(t, "req", req.mustSucceed(), "a\tb", "c")
		if err := rep.Wait(); err != nil {
			t.Fatalf("peer.py rep: %v: %s", err, repOut.String())
		}
		if !strings.Contains(repOut.String(), "a\tb\nc\n") {
			t.Fatalf("peer.py rep printed %q", repOut.String())
		}
	})
}

// TestCLIBench runs the socket benchmarks with small counts: one process,
// separate processes, and the libzmq figure when pyzmq is there.
func TestCLIBench(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"pushpull", "--transport", "inproc", "--count", "2000"},
		{"pubsub", "--transport", "ipc", "--count", "2000", "--size", "64"},
		{"reqrep", "--transport", "tcp", "--count", "200"},
		{"pushpull", "--separate", "--transport", "ipc", "--count", "2000"},
		{"reqrep", "--separate", "--transport", "tcp", "--count", "200"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			p := startCLI(t, append([]string{"bench"}, args...)...)
			p.closeStdin()
			out := p.mustSucceed()
			if len(out) != 1 || !strings.HasPrefix(out[0], args[0]+" ") || !strings.Contains(out[0], " msg/s, ") {
				t.Fatalf("bench printed %q", out)
			}
			if args[0] != "pubsub" && !strings.Contains(out[0], "p50=") {
				t.Fatalf("bench printed no latency: %q", out)
			}
		})
	}
	t.Run("libzmq", func(t *testing.T) {
		testutil.Pyzmq(t)
		script := filepath.Join("..", "..", "socket", "testdata", "interop", "perf.py")
		p := startCLI(t, "bench", "reqrep", "--separate", "--count", "200", "--libzmq", script)
		p.closeStdin()
		out := p.mustSucceed()
		if len(out) != 4 || !strings.Contains(out[1], "(libzmq-pyzmq)") || !strings.HasPrefix(out[3], "ratio fastmq/libzmq p50 round trip: ") {
			t.Fatalf("bench --libzmq printed %q", out)
		}
	})
	t.Run("rounds", func(t *testing.T) {
		testutil.Pyzmq(t)
		script := filepath.Join("..", "..", "socket", "testdata", "interop", "perf.py")
		p := startCLI(t, "bench", "pushpull", "--separate", "--count", "2000", "--rounds", "2", "--libzmq", script)
		p.closeStdin()
		out := p.mustSucceed()
		// Per round: a header, ours, libzmq's and the ratio; then the medians.
		if len(out) != 9 || out[0] != "round 1 of 2" || out[4] != "round 2 of 2" ||
			!strings.HasPrefix(out[8], "median of 2 rounds: fastmq ") || !strings.Contains(out[8], "ratio fastmq/libzmq msg/s ") {
			t.Fatalf("bench --rounds printed %q", out)
		}
	})
	t.Run("bad rounds", func(t *testing.T) {
		p := startCLI(t, "bench", "pushpull", "--rounds", "0")
		p.closeStdin()
		if _, err := p.wait(); err == nil {
			t.Fatal("--rounds 0 succeeded")
		}
	})
}

// FuzzPlainUsers checks the --plain-users parser on arbitrary files: it
// never panics, and every user it returns came from a user:password line.
func FuzzPlainUsers(f *testing.F) {
	f.Add([]byte("alice:wonderland\nbob:builder\n"))
	f.Add([]byte("# comment\n\nu:p:with:colons\r\n"))
	f.Add([]byte(":nouser\n"))
	f.Add([]byte("nocolon\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		users, err := parsePlainUsers("users", data)
		if err != nil {
			return
		}
		if len(users) == 0 {
			t.Fatal("no error and no users")
		}
		for u, p := range users {
			if u == "" || !bytes.Contains(data, []byte(u+":"+p)) {
				t.Fatalf("user %q password %q not in %q", u, p, data)
			}
		}
	})
}

// TestCLISendersStopOnSignal checks that push, pub and req exit cleanly on
// SIGTERM and SIGINT while they wait for a line on stdin (they used to
// ignore both until stdin closed).
func TestCLISendersStopOnSignal(t *testing.T) {
	for _, tc := range []struct {
		tool string
		sig  os.Signal
	}{
		{"push", syscall.SIGTERM}, {"pub", syscall.SIGINT}, {"req", syscall.SIGTERM}, {"dealer", syscall.SIGTERM},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			p := startCLI(t, tc.tool, "--bind", "tcp://127.0.0.1:0")
			p.boundEndpoint() // running, and reading stdin from now on
			p.cmd.Process.Signal(tc.sig)
			if _, err := p.wait(); err != nil {
				t.Fatalf("%s after %v: %v\n%s", tc.tool, tc.sig, err, p.stderr())
			}
		})
	}
}
