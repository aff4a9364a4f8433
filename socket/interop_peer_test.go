package socket_test

// The interop suite's harness: python peers (testdata/interop/peer.py)
// and helpers to link, send to and read from them.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/socket"
)

// pythonPath is Debian's python3, which the benchmarks against libzmq use.
const pythonPath = "/usr/bin/python3"

// needPyzmq returns a python3 with pyzmq (and its auth thread), or skips
// the test, failing it under CI (testutil.Pyzmq).
func needPyzmq(t *testing.T) string {
	t.Helper()
	return testutil.Pyzmq(t, "zmq.auth.thread")
}

// pyPeer is one running peer.py process.
type pyPeer struct {
	t        *testing.T
	cmd      *exec.Cmd
	stderr   bytes.Buffer
	lines    chan string
	stdin    io.WriteCloser
	exited   chan struct{}
	exitErr  error
	endpoint string
}

// startPeer runs peer.py with args (ROLE ENDPOINT bind|connect ...) and
// waits for its ENDPOINT line.
func startPeer(t *testing.T, args ...string) *pyPeer {
	t.Helper()
	py := needPyzmq(t)
	script := filepath.Join("testdata", "interop", "peer.py")
	p := &pyPeer{t: t, lines: make(chan string, 4096), exited: make(chan struct{})}
	p.cmd = exec.Command(py, append([]string{script}, args...)...)
	p.cmd.Stderr = &p.stderr
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start peer.py: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.kill)
	first, ok := p.next(15 * time.Second)
	ep, found := strings.CutPrefix(first, "ENDPOINT ")
	if !ok || !found {
		p.kill()
		t.Fatalf("peer.py %v: want ENDPOINT line, got %q (stderr: %s)", args, first, p.stderr.String())
	}
	p.endpoint = ep
	return p
}

// next returns the next stdout line, or false at the end or after d.
func (p *pyPeer) next(d time.Duration) (string, bool) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case l, ok := <-p.lines:
		return l, ok
	case <-tm.C:
		return "", false
	}
}

// kill ends the process if it still runs and waits for it.
func (p *pyPeer) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Kill()
	for range p.lines {
	}
	<-p.exited
}

// running reports whether the process has not exited yet.
func (p *pyPeer) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// untilDone returns the output lines between the ENDPOINT line and DONE,
// without waiting for the process to exit (see --hold).
func (p *pyPeer) untilDone() []string {
	p.t.Helper()
	var lines []string
	deadline := time.NewTimer(25 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.exited
				p.t.Fatalf("peer.py ended without DONE: %v\nstdout: %q\nstderr: %s", p.exitErr, lines, p.stderr.String())
			}
			if l == "DONE" {
				return lines
			}
			lines = append(lines, l)
		case <-deadline.C:
			p.kill()
			p.t.Fatalf("peer.py did not finish; stdout so far: %q, stderr: %s", lines, p.stderr.String())
		}
	}
}

// wait returns the output lines between the ENDPOINT line and DONE, and
// waits for a clean exit.
func (p *pyPeer) wait() []string {
	p.t.Helper()
	lines := p.untilDone()
	p.release()
	return lines
}

// release closes the peer's stdin (ending --hold) and waits for a clean
// exit.
func (p *pyPeer) release() {
	p.t.Helper()
	p.stdin.Close()
	for range p.lines {
	}
	<-p.exited
	if p.exitErr != nil {
		p.t.Fatalf("peer.py failed after DONE: %v\nstderr: %s", p.exitErr, p.stderr.String())
	}
}

// shortIPC returns an ipc endpoint in a fresh short directory (unix socket
// paths are limited to about 100 bytes, and t.TempDir paths can be longer).
func shortIPC(t *testing.T) string {
	t.Helper()
	return "ipc://" + filepath.Join(testutil.ShortDir(t), "s.sock")
}

func newSock(t *testing.T, kind socket.Kind, cfg socket.Config) *socket.Socket {
	t.Helper()
	s, err := socket.New(kind, cfg)
	if err != nil {
		t.Fatalf("New(%v): %v", kind, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logEvents(t, s)
		}
		s.Close()
	})
	return s
}

// logEvents logs the events still queued on s, to explain a failure.
func logEvents(t *testing.T, s *socket.Socket) {
	for range 1000 {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				return
			}
			t.Logf("%v event: %v", s.Kind(), ev)
		default:
			return
		}
	}
}

// link connects our socket s and a python peer (role, extra args) over
// transport, with us binding when weBind; it returns the started peer.
func link(t *testing.T, s *socket.Socket, transport string, weBind bool, role string, extra ...string) *pyPeer {
	t.Helper()
	ep := "tcp://127.0.0.1:0"
	pyEP := "tcp://127.0.0.1:*"
	if transport == "ipc" {
		ep = shortIPC(t)
		pyEP = ep
	}
	if weBind {
		got, err := s.Bind(ep)
		if err != nil {
			t.Fatalf("Bind(%s): %v", ep, err)
		}
		return startPeer(t, append([]string{role, got, "connect"}, extra...)...)
	}
	p := startPeer(t, append([]string{role, pyEP, "bind"}, extra...)...)
	if err := s.Connect(p.endpoint); err != nil {
		t.Fatalf("Connect(%s): %v", p.endpoint, err)
	}
	return p
}

func send(t *testing.T, ctx context.Context, s *socket.Socket, frames ...string) {
	t.Helper()
	if err := s.Send(ctx, socket.NewMsgString(frames...)); err != nil {
		t.Fatalf("Send(%q): %v", frames, err)
	}
}

func recvStrings(t *testing.T, ctx context.Context, s *socket.Socket) []string {
	t.Helper()
	m, err := s.Recv(ctx)
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	out := make([]string, len(m.Frames))
	for i, f := range m.Frames {
		out[i] = string(f)
	}
	return out
}

func wantFrames(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
		t.Fatalf("got frames %q, want %q", got, want)
	}
}

func wantLines(t *testing.T, got []string, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("python peer printed\n%q\nwant\n%q", got, want)
	}
}

func seq(format string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i)
	}
	return out
}
