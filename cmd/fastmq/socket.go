package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq/socket"
)

// sockOpts holds the flags shared by the socket tools plus the few that only
// some of them use.
type sockOpts struct {
	bind       []string
	connect    []string
	count      int
	timeout    time.Duration
	multipart  bool
	identity   string
	hwm        int
	heartbeat  time.Duration
	linger     time.Duration
	plainUser  string
	plainPass  string
	plainUsers string
	events     bool

	subscribe []string
	echo      bool
	exec      string
	noDrop    bool
}

// sockTool describes one socket subcommand.
type sockTool struct {
	name  string
	kind  socket.Kind
	short string
	long  string
	run   func(ctx context.Context, t *sockRun) error
	extra func(cmd *cobra.Command, o *sockOpts)
}

var sockTools = []sockTool{
	{name: "push", kind: socket.Push, run: runSender,
		short: "Send each stdin line as one message on a PUSH socket",
		long:  "Reads stdin and sends each line as one message, round-robin over the connected PULL peers."},
	{name: "pull", kind: socket.Pull, run: runReceiver,
		short: "Print each message received on a PULL socket, one per line"},
	{name: "pub", kind: socket.Pub, run: runSender,
		short: "Publish each stdin line as one message on a PUB socket",
		long: "Reads stdin and publishes each line as one message. Subscribers that are not yet " +
			"connected, or whose subscription has not yet arrived, miss it. A subscriber whose " +
			"queue is full misses it too, unless --no-drop makes the publisher wait for it. With " +
			"--no-drop and --events, a send that has waited " + sendWaitReport.String() + " is reported on stderr " +
			"as \"event send-wait: ... since TIME\", and \"event send-wait: done after DURATION\" when it ends.",
		extra: func(cmd *cobra.Command, o *sockOpts) {
			cmd.Flags().BoolVar(&o.noDrop, "no-drop", false, "wait for a subscriber whose queue is full instead of dropping for it (ZMQ_XPUB_NODROP)")
		}},
	{name: "sub", kind: socket.Sub, run: runReceiver,
		short: "Print each message received on a SUB socket, one per line",
		extra: func(cmd *cobra.Command, o *sockOpts) {
			cmd.Flags().StringArrayVar(&o.subscribe, "subscribe", nil, "subscribe to messages starting with `PREFIX` (repeatable; none: everything)")
		}},
	{name: "req", kind: socket.Req, run: runReq,
		short: "Send each stdin line as a request on a REQ socket and print the reply"},
	{name: "rep", kind: socket.Rep, run: runRep,
		short: "Answer requests on a REP socket",
		long: "Prints each request and replies with the next stdin line; with --echo replies with the " +
			"request itself; with --exec runs the command (sh -c) with the request on its stdin and " +
			"replies with its output.",
		extra: func(cmd *cobra.Command, o *sockOpts) {
			cmd.Flags().BoolVar(&o.echo, "echo", false, "reply with the request itself")
			cmd.Flags().StringVar(&o.exec, "exec", "", "reply with the output of `CMD` (run via sh -c, request on its stdin)")
		}},
	{name: "router", kind: socket.Router, run: runDuplex,
		short: "Print identity<TAB>frames for each message on a ROUTER socket; send stdin lines",
		long: "Prints each message as identity TAB frames, the identity printable or as 0x-prefixed hex. " +
			"Each stdin line is sent as a message: its first TAB-separated field is the destination " +
			"identity (printable or 0x hex), the rest are the frames. With --echo sends every message " +
			"straight back to its sender.",
		extra: func(cmd *cobra.Command, o *sockOpts) {
			cmd.Flags().BoolVar(&o.echo, "echo", false, "send each message back to its sender")
		}},
	{name: "dealer", kind: socket.Dealer, run: runDuplex,
		short: "Send stdin lines and print received messages on a DEALER socket"},
	{name: "pair", kind: socket.Pair, run: runDuplex,
		short: "Send stdin lines and print received messages on a PAIR socket",
		extra: func(cmd *cobra.Command, o *sockOpts) {
			cmd.Flags().BoolVar(&o.echo, "echo", false, "send each message back")
		}},
}

func init() {
	for _, tool := range sockTools {
		rootCmd.AddCommand(newSockCmd(tool))
	}
}

func newSockCmd(tool sockTool) *cobra.Command {
	o := &sockOpts{}
	long := tool.long
	if long == "" {
		long = tool.short + "."
	}
	long += "\n\nWith --multipart, frames are TAB-separated on input and output. " +
		"--count N exits after N messages; --timeout D bounds every send and receive " +
		"and exits non-zero when one takes longer."
	cmd := &cobra.Command{
		Use:   tool.name + " (--bind EP | --connect EP)...",
		Short: tool.short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSockTool(cmd, tool, o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.bind, "bind", nil, "bind to `ENDPOINT` (tcp://host:port or ipc://path; repeatable)")
	f.StringArrayVar(&o.connect, "connect", nil, "connect to `ENDPOINT` (repeatable)")
	f.IntVar(&o.count, "count", 0, "exit after `N` messages (0: no limit)")
	f.DurationVar(&o.timeout, "timeout", 0, "fail when a single send or receive takes longer than `D` (0: wait forever)")
	f.BoolVar(&o.multipart, "multipart", false, "split input lines into frames at TABs")
	f.StringVar(&o.identity, "identity", "", "socket identity (routing id) seen by ROUTER peers")
	f.IntVar(&o.hwm, "hwm", 0, "send and receive high-water mark in messages (0: library default)")
	f.DurationVar(&o.heartbeat, "heartbeat", 0, "send ZMTP heartbeats every `D` (0: off)")
	f.DurationVar(&o.linger, "linger", 5*time.Second, "on exit, wait up to `D` for queued messages to be sent")
	f.StringVar(&o.plainUser, "plain-user", "", "PLAIN user name (client side)")
	f.StringVar(&o.plainPass, "plain-pass", "", "PLAIN password (client side)")
	f.StringVar(&o.plainUsers, "plain-users", "", "accept PLAIN clients listed in `FILE` as user:password lines (server side)")
	f.BoolVar(&o.events, "events", false, "print socket events (connected, disconnected, ...) on stderr")
	if tool.extra != nil {
		tool.extra(cmd, o)
	}
	return cmd
}

// sockRun is one running socket tool.
type sockRun struct {
	o    *sockOpts
	kind socket.Kind
	s    *socket.Socket
	in   *bufio.Reader
	out  *bufio.Writer
	omu  sync.Mutex
	seen int       // messages counted towards --count
	errw io.Writer // stderr, for the send-wait reports
}

func runSockTool(cmd *cobra.Command, tool sockTool, o *sockOpts) error {
	if len(o.bind)+len(o.connect) == 0 {
		return errors.New("need at least one --bind or --connect endpoint")
	}
	if o.count < 0 {
		return errors.New("--count must not be negative")
	}
	if o.echo && o.exec != "" {
		return errors.New("--echo and --exec exclude each other")
	}
	cfg, err := sockConfig(o)
	if err != nil {
		return err
	}
	s, err := socket.New(tool.kind, cfg)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	var evWG sync.WaitGroup
	evDone := make(chan struct{})
	if o.events {
		evWG.Add(1)
		go func() {
			defer evWG.Done()
			printEvents(cmd.ErrOrStderr(), s.Events(), evDone)
		}()
	}
	defer func() {
		s.Close()
		close(evDone)
		evWG.Wait()
	}()
	for _, ep := range o.bind {
		got, err := s.Bind(ep)
		if err != nil {
			return fmt.Errorf("bind %s: %w", ep, err)
		}
		fmt.Fprintln(cmd.ErrOrStderr(), "bound", got)
	}
	for _, ep := range o.connect {
		if err := s.Connect(ep); err != nil {
			return fmt.Errorf("connect %s: %w", ep, err)
		}
	}
	for _, p := range o.subscribe {
		if err := s.Subscribe([]byte(p)); err != nil {
			return fmt.Errorf("subscribe %q: %w", p, err)
		}
	}
	if tool.kind == socket.Sub && len(o.subscribe) == 0 {
		if err := s.Subscribe(nil); err != nil {
			return fmt.Errorf("subscribe to everything: %w", err)
		}
	}
	r := &sockRun{
		o:    o,
		kind: tool.kind,
		s:    s,
		errw: cmd.ErrOrStderr(),
		in:   bufio.NewReaderSize(cmd.InOrStdin(), 64<<10),
		out:  bufio.NewWriter(cmd.OutOrStdout()),
	}
	err = tool.run(ctx, r)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		err = nil // interrupted: a normal way to stop a receiver
	}
	return err
}

func sockConfig(o *sockOpts) (socket.Config, error) {
	cfg := socket.Config{
		Identity:          []byte(o.identity),
		SendHWM:           o.hwm,
		RecvHWM:           o.hwm,
		Linger:            o.linger,
		HeartbeatInterval: o.heartbeat,
		PlainUsername:     o.plainUser,
		PlainPassword:     o.plainPass,
		PubNoDrop:         o.noDrop,
	}
	if o.identity == "" {
		cfg.Identity = nil
	}
	if o.heartbeat > 0 {
		cfg.HeartbeatTimeout = 3 * o.heartbeat
		cfg.HeartbeatTTL = 3 * o.heartbeat
	}
	if (o.plainUser != "" || o.plainPass != "") && o.plainUsers != "" {
		return cfg, errors.New("--plain-user/--plain-pass (client) and --plain-users (server) exclude each other")
	}
	if o.plainUsers != "" {
		users, err := readPlainUsers(o.plainUsers)
		if err != nil {
			return cfg, err
		}
		cfg.PlainAuth = func(user, pass string) bool {
			want, ok := users[user]
			// Compare even for unknown users so timing says little.
			eq := subtle.ConstantTimeCompare([]byte(want), []byte(pass)) == 1
			return ok && eq
		}
	}
	return cfg, nil
}

// readPlainUsers reads user:password lines. Blank lines and lines starting
// with # are skipped.
func readPlainUsers(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read PLAIN users: %w", err)
	}
	return parsePlainUsers(path, data)
}

// parsePlainUsers parses the user:password lines of a --plain-users file
// named name.
func parsePlainUsers(path string, data []byte) (map[string]string, error) {
	users := make(map[string]string)
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, pass, ok := strings.Cut(line, ":")
		if !ok || user == "" {
			return nil, fmt.Errorf("%s:%d: want user:password", path, i+1)
		}
		users[user] = pass
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("%s: no users", path)
	}
	return users, nil
}

func printEvents(w io.Writer, ch <-chan socket.Event, done <-chan struct{}) {
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return
			}
			fmt.Fprintln(w, "event", ev)
		case <-done:
			return
		}
	}
}

// opCtx returns the context for one send or receive, bounded by --timeout.
func (r *sockRun) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.o.timeout > 0 {
		return context.WithTimeout(ctx, r.o.timeout)
	}
	return context.WithCancel(ctx)
}

// sendWaitReport is how long a --no-drop send waits before --events
// reports it.
const sendWaitReport = 100 * time.Millisecond

func (r *sockRun) send(ctx context.Context, m socket.Msg) error {
	octx, cancel := r.opCtx(ctx)
	defer cancel()
	var err error
	if r.o.noDrop && r.o.events {
		err = r.sendReportingWait(octx, m)
	} else {
		err = r.s.Send(octx, m)
	}
	if err != nil && ctx.Err() == nil && octx.Err() != nil {
		return fmt.Errorf("timed out after %v sending a message (is a peer connected?)", r.o.timeout)
	}
	return err
}

// sendReportingWait sends m and, when the send waits longer than
// sendWaitReport (a subscriber's queue is full under --no-drop), reports on
// stderr when the wait began and, once it ends, how long it lasted.
func (r *sockRun) sendReportingWait(ctx context.Context, m socket.Msg) error {
	began := time.Now()
	reported := make(chan struct{})
	t := time.AfterFunc(sendWaitReport, func() {
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

func (r *sockRun) recv(ctx context.Context) (socket.Msg, error) {
	octx, cancel := r.opCtx(ctx)
	defer cancel()
	m, err := r.s.Recv(octx)
	if err != nil && ctx.Err() == nil && octx.Err() != nil {
		return m, fmt.Errorf("timed out after %v waiting for a message", r.o.timeout)
	}
	return m, err
}

// done counts one message towards --count and reports whether the limit is
// reached.
func (r *sockRun) done() bool {
	r.seen++
	return r.o.count > 0 && r.seen >= r.o.count
}

// readLine returns the next stdin line without its line end; io.EOF at the
// end of input (a last line without a newline is still returned).
func (r *sockRun) readLine() ([]byte, error) {
	line, err := r.in.ReadBytes('\n')
	if len(line) > 0 {
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		return line, nil
	}
	return nil, err
}

// lineMsg turns an input line into a message.
func (r *sockRun) lineMsg(line []byte) socket.Msg {
	if r.o.multipart {
		return socket.NewMsg(bytes.Split(line, []byte("\t"))...)
	}
	return socket.NewMsg(line)
}

// print writes a message as one line, frames joined by TAB.
func (r *sockRun) print(m socket.Msg) error {
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
func (r *sockRun) printRouted(m socket.Msg) error {
	if len(m.Frames) == 0 {
		return r.print(m)
	}
	frames := make([][]byte, len(m.Frames))
	frames[0] = []byte(formatIdentity(m.Frames[0]))
	copy(frames[1:], m.Frames[1:])
	return r.print(socket.Msg{Frames: frames})
}

// formatIdentity shows a routing id as text when it is printable and starts
// with neither 0x nor a zero byte, else as 0x-prefixed hex.
func formatIdentity(id []byte) string {
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

// parseIdentity is the inverse of formatIdentity.
func parseIdentity(s []byte) ([]byte, error) {
	if rest, ok := bytes.CutPrefix(s, []byte("0x")); ok {
		id := make([]byte, hex.DecodedLen(len(rest)))
		if _, err := hex.Decode(id, rest); err != nil {
			return nil, fmt.Errorf("identity %q: %w", s, err)
		}
		return id, nil
	}
	return s, nil
}

// runSender sends each stdin line (push, pub).
func runSender(ctx context.Context, r *sockRun) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, err := r.readLine()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
		if err := r.send(ctx, r.lineMsg(line)); err != nil {
			return err
		}
		if r.done() {
			return nil
		}
	}
}

// runReceiver prints every message (pull, sub).
func runReceiver(ctx context.Context, r *sockRun) error {
	for {
		m, err := r.recv(ctx)
		if err != nil {
			return err
		}
		if err := r.print(m); err != nil {
			return err
		}
		if r.done() {
			return nil
		}
	}
}

// runReq sends each stdin line as a request and prints the reply.
func runReq(ctx context.Context, r *sockRun) error {
	for {
		line, err := r.readLine()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
		if err := r.send(ctx, r.lineMsg(line)); err != nil {
			return err
		}
		m, err := r.recv(ctx)
		if err != nil {
			return err
		}
		if err := r.print(m); err != nil {
			return err
		}
		if r.done() {
			return nil
		}
	}
}

// runRep answers requests: echo, exec, or the next stdin line.
func runRep(ctx context.Context, r *sockRun) error {
	for {
		req, err := r.recv(ctx)
		if err != nil {
			return err
		}
		var reply socket.Msg
		switch {
		case r.o.echo:
			reply = req
		case r.o.exec != "":
			reply, err = r.execReply(ctx, req)
			if err != nil {
				return err
			}
		default:
			if err := r.print(req); err != nil {
				return err
			}
			line, err := r.readLine()
			if err == io.EOF {
				return errors.New("stdin ended before a reply to the last request")
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
func (r *sockRun) execReply(ctx context.Context, req socket.Msg) (socket.Msg, error) {
	in := bytes.Join(req.Frames, []byte("\t"))
	in = append(in, '\n')
	c := exec.CommandContext(ctx, "sh", "-c", r.o.exec)
	c.Stdin = bytes.NewReader(in)
	c.Stderr = os.Stderr
	out, err := c.Output()
	if ctx.Err() != nil {
		return socket.Msg{}, ctx.Err()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "fastmq: --exec %q: %v\n", r.o.exec, err)
	}
	out = bytes.TrimSuffix(out, []byte("\n"))
	if r.o.multipart {
		return socket.NewMsg(bytes.Split(out, []byte("\t"))...), nil
	}
	return socket.NewMsg(out), nil
}

// runDuplex sends stdin lines and prints what arrives (router, dealer,
// pair). --count counts received messages; without --count it runs until
// interrupted (or until --timeout passes without a message).
func runDuplex(ctx context.Context, r *sockRun) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	if !r.o.echo {
		// The stdin reader may stay blocked in Read after we return; it
		// only ever hands lines over through this channel, so it is
		// harmless in a command that exits right after.
		lines := make(chan []byte)
		go func() {
			defer close(lines)
			for {
				line, err := r.readLine()
				if err != nil {
					return
				}
				select {
				case lines <- line:
				case <-ctx.Done():
					return
				}
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var line []byte
				select {
				case l, ok := <-lines:
					if !ok {
						return
					}
					line = l
				case <-ctx.Done():
					return
				}
				m := r.lineMsg(line)
				if r.kind == socket.Router {
					fields := bytes.Split(line, []byte("\t"))
					id, err := parseIdentity(fields[0])
					if err != nil {
						errc <- err
						cancel()
						return
					}
					if r.o.multipart || len(fields) == 1 {
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
			if r.o.echo {
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
