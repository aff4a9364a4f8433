package benchkit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
)

// readyLine is what a child prints on stdout once it is set up.
const readyLine = "ready\n"

// ErrNoReport is returned by Child.Report when the child ended without
// printing its report.
var ErrNoReport = errors.New("benchkit: the child ended without its report")

// Child is a child process that measures one side of a run (a consumer, a
// group member) and reports in JSON: it prints "ready" on stdout once set
// up (Ready), works until its stdin closes (WaitForStop), then prints its
// report R as one JSON value on stdout. Its methods are for one goroutine;
// Report and Wait may be called in either order, Wait more than once.
type Child[R any] struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	report chan R        // the report, if one came; closed when stdout ends
	read   chan struct{} // closed when the reader has finished with stdout
	once   sync.Once
	err    error
}

// StartChild starts cmd, whose Stdin and Stdout must be unset (Stderr
// defaults to this process's), and waits for its "ready" line. If the child
// fails to start or says anything else first, StartChild stops it, waits
// for it, and returns the error.
func StartChild[R any](cmd *exec.Cmd) (*Child[R], error) {
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		stdin.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		stdin.Close()
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	c := &Child[R]{cmd: cmd, stdin: stdin, report: make(chan R, 1), read: make(chan struct{})}
	ready := make(chan error, 1)
	go c.readStdout(stdout, ready) // ends when the child closes its stdout; Wait waits for it
	if err := <-ready; err != nil {
		cmd.Process.Kill()
		c.Wait()
		return nil, err
	}
	return c, nil
}

func (c *Child[R]) readStdout(stdout io.Reader, ready chan<- error) {
	defer close(c.read)
	defer close(c.report)
	r := bufio.NewReader(stdout)
	line, err := r.ReadString('\n')
	if err != nil || line != readyLine {
		ready <- fmt.Errorf("%s did not start: it said %q (%v)", c.cmd.Path, line, err)
		io.Copy(io.Discard, r)
		return
	}
	ready <- nil
	var rep R
	if err := json.NewDecoder(r).Decode(&rep); err == nil {
		c.report <- rep
	}
	io.Copy(io.Discard, r)
}

// Report closes the child's stdin, which tells it to stop, and returns the
// report it prints; ErrNoReport if it ends without one.
func (c *Child[R]) Report() (R, error) {
	c.stdin.Close()
	rep, ok := <-c.report
	if !ok {
		return rep, ErrNoReport
	}
	return rep, nil
}

// Wait closes the child's stdin (if Report has not), waits for it to exit
// and returns its exit error; later calls return the same.
func (c *Child[R]) Wait() error {
	c.once.Do(func() {
		c.stdin.Close()
		<-c.read
		c.err = c.cmd.Wait()
	})
	return c.err
}

// Ready is the child's side of StartChild: it tells the parent, on w (the
// child's stdout), that the child is set up.
func Ready(w io.Writer) error {
	_, err := io.WriteString(w, readyLine)
	return err
}

// WaitForStop is the child's side of Report: it blocks until the parent
// closes the child's stdin (or stdin fails).
func WaitForStop() {
	io.Copy(io.Discard, os.Stdin)
}
