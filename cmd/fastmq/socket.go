package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq/cmd/fastmq/internal/socktool"
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

	curve curveOpts
}

// sockTool describes one socket subcommand.
type sockTool struct {
	name  string
	kind  socket.Kind
	short string
	long  string
	run   func(ctx context.Context, t *socktool.Run) error
	extra func(cmd *cobra.Command, o *sockOpts)
}

var sockTools = []sockTool{
	{name: "push", kind: socket.Push, run: socktool.Sender,
		short: "Send each stdin line as one message on a PUSH socket",
		long:  "Reads stdin and sends each line as one message, round-robin over the connected PULL peers."},
	{name: "pull", kind: socket.Pull, run: socktool.Receiver,
		short: "Print each message received on a PULL socket, one per line"},
	{name: "pub", kind: socket.Pub, run: socktool.Sender,
		short: "Publish each stdin line as one message on a PUB socket",
		long: "Reads stdin and publishes each line as one message. Subscribers that are not yet " +
			"connected, or whose subscription has not yet arrived, miss it. A subscriber whose " +
			"queue is full misses it too, unless --no-drop makes the publisher wait for it. With " +
			"--no-drop and --events, a send that has waited " + socktool.SendWaitReport.String() + " is reported on stderr " +
			"as \"event send-wait: ... since TIME\", and \"event send-wait: done after DURATION\" when it ends.",
		extra: func(cmd *cobra.Command, o *sockOpts) {
			cmd.Flags().BoolVar(&o.noDrop, "no-drop", false, "wait for a subscriber whose queue is full instead of dropping for it (ZMQ_XPUB_NODROP)")
		}},
	{name: "sub", kind: socket.Sub, run: socktool.Receiver,
		short: "Print each message received on a SUB socket, one per line",
		extra: func(cmd *cobra.Command, o *sockOpts) {
			cmd.Flags().StringArrayVar(&o.subscribe, "subscribe", nil, "subscribe to messages starting with `PREFIX` (repeatable; none: everything)")
		}},
	{name: "req", kind: socket.Req, run: socktool.Req,
		short: "Send each stdin line as a request on a REQ socket and print the reply"},
	{name: "rep", kind: socket.Rep, run: socktool.Rep,
		short: "Answer requests on a REP socket",
		long: "Prints each request and replies with the next stdin line; with --echo replies with the " +
			"request itself; with --exec runs the command (sh -c) with the request on its stdin and " +
			"replies with its output.",
		extra: func(cmd *cobra.Command, o *sockOpts) {
			cmd.Flags().BoolVar(&o.echo, "echo", false, "reply with the request itself")
			cmd.Flags().StringVar(&o.exec, "exec", "", "reply with the output of `CMD` (run via sh -c, request on its stdin)")
		}},
	{name: "router", kind: socket.Router, run: socktool.Duplex,
		short: "Print identity<TAB>frames for each message on a ROUTER socket; send stdin lines",
		long: "Prints each message as identity TAB frames, the identity printable or as 0x-prefixed hex. " +
			"Each stdin line is sent as a message: its first TAB-separated field is the destination " +
			"identity (printable or 0x hex), the rest are the frames. With --echo sends every message " +
			"straight back to its sender.",
		extra: func(cmd *cobra.Command, o *sockOpts) {
			cmd.Flags().BoolVar(&o.echo, "echo", false, "send each message back to its sender")
		}},
	{name: "dealer", kind: socket.Dealer, run: socktool.Duplex,
		short: "Send stdin lines and print received messages on a DEALER socket"},
	{name: "pair", kind: socket.Pair, run: socktool.Duplex,
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
	addCurveFlags(f, &o.curve)
	if tool.extra != nil {
		tool.extra(cmd, o)
	}
	return cmd
}

func runSockTool(cmd *cobra.Command, tool sockTool, o *sockOpts) error {
	if len(o.bind)+len(o.connect) == 0 {
		return errors.New("need at least one --bind or --connect endpoint")
	}
	if o.count < 0 {
		return errors.New("--count must not be negative")
	}
	if o.timeout < 0 {
		return fmt.Errorf("--timeout %v: must not be negative (0 waits forever)", o.timeout)
	}
	if o.linger < 0 {
		return fmt.Errorf("--linger %v: must not be negative (0 discards what is queued at exit)", o.linger)
	}
	if o.heartbeat < 0 {
		return fmt.Errorf("--heartbeat %v: must not be negative", o.heartbeat)
	}
	if o.echo && o.exec != "" {
		return errors.New("--echo and --exec exclude each other")
	}
	cfg, err := sockConfig(o)
	if err != nil {
		return err
	}
	if err := applyCurve(&cfg, o.curve, cmd.ErrOrStderr()); err != nil {
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
	r := socktool.New(socktool.Options{
		Count:     o.count,
		Timeout:   o.timeout,
		Multipart: o.multipart,
		Echo:      o.echo,
		Exec:      o.exec,
		NoDrop:    o.noDrop,
		Events:    o.events,
	}, tool.kind, s, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
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
	if o.linger == 0 {
		cfg.Linger = -1 // --linger 0: discard what is queued at exit
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
