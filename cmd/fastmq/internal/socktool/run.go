package socktool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/fastmq/fastmq/socket"
)

// Options are the flags of the socket tools that the run loops use.
type Options struct {
	Count     int           // --count: stop after this many messages (0: no limit)
	Timeout   time.Duration // --timeout: bound on every send and receive (0: none)
	Multipart bool          // --multipart: TAB separates frames
	Echo      bool          // --echo: send each message back
	Exec      string        // --exec: reply with this command's output
	NoDrop    bool          // --no-drop: the PUB waits for a full subscriber
	Events    bool          // --events: report socket events (and send waits) on stderr
}

// Run is one running socket tool: its socket, its standard streams and its
// count. It is used by one goroutine at a time, the run loop's (Sender,
// Receiver, Req, Rep or Duplex), besides the --exec children it starts.
type Run struct {
	o    Options
	kind socket.Kind
	s    *socket.Socket
	in   *bufio.Reader
	out  *bufio.Writer
	omu  sync.Mutex
	seen int       // messages counted towards --count
	errw io.Writer // stderr, for the send-wait reports

	linesOnce sync.Once
	lines     chan stdinLine // from the stdin reader, see nextLine
}

// stdinLine is one line read from stdin, or the error that ended it.
type stdinLine struct {
	line []byte
	err  error
}

// New returns a run of a socket of kind over s, reading lines from in and
// printing messages to out and reports to errw.
func New(o Options, kind socket.Kind, s *socket.Socket, in io.Reader, out, errw io.Writer) *Run {
	return &Run{o: o, kind: kind, s: s, in: bufio.NewReaderSize(in, 64<<10), out: bufio.NewWriter(out), errw: errw}
}

// opCtx returns the context for one send or receive, bounded by --timeout.
func (r *Run) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.o.Timeout > 0 {
		return context.WithTimeout(ctx, r.o.Timeout)
	}
	return context.WithCancel(ctx)
}

// SendWaitReport is how long a --no-drop send waits before --events
// reports it on stderr.
const SendWaitReport = 100 * time.Millisecond

func (r *Run) send(ctx context.Context, m socket.Msg) error {
	octx, cancel := r.opCtx(ctx)
	defer cancel()
	var err error
	if r.o.NoDrop && r.o.Events {
		err = r.sendReportingWait(octx, m)
	} else {
		err = r.s.Send(octx, m)
	}
	if err != nil && ctx.Err() == nil && octx.Err() != nil {
		return fmt.Errorf("timed out after %v sending a message (is a peer connected?)", r.o.Timeout)
	}
	return err
}

// sendReportingWait sends m and, when the send waits longer than
// SendWaitReport (a subscriber's queue is full under --no-drop), reports on
// stderr when the wait began and, once it ends, how long it lasted.
func (r *Run) sendReportingWait(ctx context.Context, m socket.Msg) error {
	began := time.Now()
	reported := make(chan struct{})
	t := time.AfterFunc(SendWaitReport, func() {
		defer close(reported)
		fmt.Fprintf(r.errw, "event send-wait: a subscriber's queue is full, waiting since %s\n", began.UTC().Format(time.RFC3339Nano))
	})
	err := r.s.Send(ctx, m)
	if !t.Stop() {
		<-reported
		fmt.Fprintf(r.errw, "event send-wait: done after %v\n", time.Since(began))
	}
	return err
}

func (r *Run) recv(ctx context.Context) (socket.Msg, error) {
	octx, cancel := r.opCtx(ctx)
	defer cancel()
	m, err := r.s.Recv(octx)
	if err != nil && ctx.Err() == nil && octx.Err() != nil {
		return m, fmt.Errorf("timed out after %v waiting for a message", r.o.Timeout)
	}
	return m, err
}

// done counts one message towards --count and reports whether the limit is
// reached.
func (r *Run) done() bool {
	r.seen++
	return r.o.Count > 0 && r.seen >= r.o.Count
}

// readLine returns the next stdin line without its line end; io.EOF at the
// end of input (a last line without a newline is still returned).
func (r *Run) readLine() ([]byte, error) {
	line, err := r.in.ReadBytes('\n')
	if len(line) > 0 {
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		return line, nil
	}
	return nil, err
}

// nextLine returns the next stdin line like readLine, or ctx's error as
// soon as ctx ends (SIGINT, SIGTERM) even while stdin has nothing to read.
// The first call starts the one goroutine that reads stdin; it may stay
// blocked in a Read after the run returns (stdin cannot be interrupted),
// which is harmless in a command that exits right after, and it only ever
// hands lines over through r.lines.
func (r *Run) nextLine(ctx context.Context) ([]byte, error) {
	r.linesOnce.Do(func() {
		r.lines = make(chan stdinLine)
		go func() {
			for {
				line, err := r.readLine()
				r.lines <- stdinLine{line, err}
				if err != nil {
					return
				}
			}
		}()
	})
	select {
	case l := <-r.lines:
		return l.line, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// lineMsg turns an input line into a message.
func (r *Run) lineMsg(line []byte) socket.Msg {
	if r.o.Multipart {
		return socket.NewMsg(bytes.Split(line, []byte("\t"))...)
	}
	return socket.NewMsg(line)
}

// print writes a message as one line, frames joined by TAB.
func (r *Run) print(m socket.Msg) error {
	r.omu.Lock()
	defer r.omu.Unlock()
	for i, f := range m.Frames {
		if i > 0 {
			r.out.WriteByte('\t')
		}
		r.out.Write(f)
	}
	r.out.WriteByte('\n')
	return r.out.Flush()
}

// printRouted writes a ROUTER message: identity TAB frames.
func (r *Run) printRouted(m socket.Msg) error {
	if len(m.Frames) == 0 {
		return r.print(m)
	}
	frames := make([][]byte, len(m.Frames))
	frames[0] = []byte(FormatIdentity(m.Frames[0]))
	copy(frames[1:], m.Frames[1:])
	return r.print(socket.Msg{Frames: frames})
}

// FormatIdentity shows a routing id as text when it is printable and starts
// with neither 0x nor a zero byte, else as 0x-prefixed hex.
func FormatIdentity(id []byte) string {
	if len(id) > 0 && id[0] != 0 && !bytes.HasPrefix(id, []byte("0x")) {
		printable := true
		for _, c := range id {
			if c < 0x21 || c > 0x7e {
				printable = false
				break
			}
		}
		if printable {
			return string(id)
		}
	}
	return "0x" + hex.EncodeToString(id)
}

// ParseIdentity is the inverse of FormatIdentity.
func ParseIdentity(s []byte) ([]byte, error) {
	if rest, ok := bytes.CutPrefix(s, []byte("0x")); ok {
		id := make([]byte, hex.DecodedLen(len(rest)))
		if _, err := hex.Decode(id, rest); err != nil {
			return nil, fmt.Errorf("identity %q: %w", s, err)
		}
		return id, nil
	}
	return s, nil
}

// Sender sends each stdin line (push, pub).
func Sender(ctx context.Context, r *Run) error {
	return r.eachLine(ctx, func(line []byte) (bool, error) {
		if err := r.send(ctx, r.lineMsg(line)); err != nil {
			return false, err
		}
		return r.done(), nil
	})
}

// eachLine calls fn with each stdin line until the input ends (nil), ctx
// ends (its error), fn fails or fn says it is done.
func (r *Run) eachLine(ctx context.Context, fn func(line []byte) (done bool, err error)) error {
	for {
		line, err := r.nextLine(ctx)
		if err == io.EOF {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
		if done, err := fn(line); err != nil || done {
			return err
		}
	}
}

// Receiver prints every message (pull, sub).
func Receiver(ctx context.Context, r *Run) error {
	for {
		if done, err := r.printNext(ctx); err != nil || done {
			return err
		}
	}
}

// printNext receives one message and prints it; done reports whether
// --count is reached.
func (r *Run) printNext(ctx context.Context) (done bool, err error) {
	m, err := r.recv(ctx)
	if err != nil {
		return false, err
	}
	if err := r.print(m); err != nil {
		return false, err
	}
	return r.done(), nil
}

// Req sends each stdin line as a request and prints the reply.
func Req(ctx context.Context, r *Run) error {
	return r.eachLine(ctx, func(line []byte) (bool, error) {
		if err := r.send(ctx, r.lineMsg(line)); err != nil {
			return false, err
		}
		return r.printNext(ctx)
	})
}

// Rep answers requests: echo, exec, or the next stdin line.
func Rep(ctx context.Context, r *Run) error {
	for {
		req, err := r.recv(ctx)
		if err != nil {
			return err
		}
		var reply socket.Msg
		switch {
		case r.o.Echo:
			reply = req
		case r.o.Exec != "":
			reply, err = r.execReply(ctx, req)
			if err != nil {
				return err
			}
		default:
			if err := r.print(req); err != nil {
				return err
			}
			line, err := r.nextLine(ctx)
			if err == io.EOF {
				return errors.New("stdin ended before a reply to the last request")
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				return fmt.Errorf("read stdin: %w", err)
			}
			reply = r.lineMsg(line)
		}
		if err := r.send(ctx, reply); err != nil {
			return err
		}
		if r.done() {
			return nil
		}
	}
}

// execReply runs --exec with the request (frames joined by TAB, plus a
// newline) on its stdin and returns its output, one trailing newline
// removed, as the reply. A failing command still produces a reply (its
// output); its error goes to stderr.
func (r *Run) execReply(ctx context.Context, req socket.Msg) (socket.Msg, error) {
	in := bytes.Join(req.Frames, []byte("\t"))
	in = append(in, '\n')
	c := exec.CommandContext(ctx, "sh", "-c", r.o.Exec)
	c.Stdin = bytes.NewReader(in)
	c.Stderr = os.Stderr
	out, err := c.Output()
	if ctx.Err() != nil {
		return socket.Msg{}, ctx.Err()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "fastmq: --exec %q: %v\n", r.o.Exec, err)
	}
	out = bytes.TrimSuffix(out, []byte("\n"))
	if r.o.Multipart {
		return socket.NewMsg(bytes.Split(out, []byte("\t"))...), nil
	}
	return socket.NewMsg(out), nil
}

// Duplex sends stdin lines and prints what arrives (router, dealer,
// pair). --count counts received messages; without --count it runs until
// interrupted (or until --timeout passes without a message).
func Duplex(ctx context.Context, r *Run) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	if !r.o.Echo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				line, err := r.nextLine(ctx)
				if err != nil {
					return // end of stdin, or ctx ended
				}
				m := r.lineMsg(line)
				if r.kind == socket.Router {
					fields := bytes.Split(line, []byte("\t"))
					id, err := ParseIdentity(fields[0])
					if err != nil {
						errc <- err
						cancel()
						return
					}
					if r.o.Multipart || len(fields) == 1 {
						fields[0] = id
						m = socket.NewMsg(fields...)
					} else {
						m = socket.NewMsg(id, bytes.Join(fields[1:], []byte("\t")))
					}
				}
				if err := r.send(ctx, m); err != nil {
					if ctx.Err() == nil {
						select {
						case errc <- err:
						default:
						}
						cancel()
					}
					return
				}
			}
		}()
	}
	err := func() error {
		for {
			m, err := r.recv(ctx)
			if err != nil {
				return err
			}
			if r.kind == socket.Router {
				err = r.printRouted(m)
			} else {
				err = r.print(m)
			}
			if err != nil {
				return err
			}
			if r.o.Echo {
				if err := r.send(ctx, m); err != nil {
					return err
				}
			}
			if r.done() {
				return nil
			}
		}
	}()
	if err != nil && ctx.Err() != nil {
		// Cancelled by the sender's failure: report that instead.
		select {
		case serr := <-errc:
			err = serr
		default:
		}
	}
	cancel()
	wg.Wait()
	return err
}
