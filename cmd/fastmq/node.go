package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/console"
	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/spool"
)

// nodeFlags are the flags of every command that runs a node.
type nodeFlags struct {
	name      string
	data      string
	gossip    string
	gossipAdv string
	join      []string
	key       string
	plaintext bool
	spoolBind string
	advertise string
	http      string
	sync      string
	codec     string
	retAge    time.Duration
	retBytes  int64
	dedupWin  time.Duration
	interest  bool
	early     bool
	leaseSync bool
	noIPC     bool
	minSync   time.Duration
	diskMax   int64
	diskFree  int64
	diskPct   float64
	diskDrop  string
	verbose   bool
	// logLevel is the level logged without --verbose: info (the zero
	// value), or warn for a command whose stderr is for its own output.
	logLevel slog.Level
	nameFlag string
	sec      nodeSecFlags  // --curve-key, --curve-allow, --acl (nodesec.go)
	httpAuth httpAuthFlags // --http-tokens, --http-peer-token (httpauth.go)
}

func (f *nodeFlags) register(cmd *cobra.Command, nameFlag, defaultName string) {
	fl := cmd.Flags()
	f.nameFlag = nameFlag
	fl.StringVar(&f.name, nameFlag, defaultName, "node name, unique in the mesh and stable across restarts")
	fl.StringVar(&f.data, "data", "", "data directory for spools and offsets (required)")
	fl.StringVar(&f.gossip, "gossip", "", "gossip bind address HOST:PORT (default 127.0.0.1:0, or the address that reaches a --join host on another machine)")
	fl.StringVar(&f.gossipAdv, "gossip-advertise", "", "gossip address HOST:PORT to advertise, if others reach this node at another address (NAT)")
	fl.StringSliceVar(&f.join, "join", nil, "gossip address of a node to join (repeatable)")
	fl.StringVar(&f.key, "key", "", "gossip encryption key, base64 of 16, 24 or 32 bytes (required for gossip beyond loopback, unless --plaintext-gossip)")
	fl.BoolVar(&f.plaintext, "plaintext-gossip", false, "allow unencrypted gossip on an address that is not loopback (trusted networks only)")
	fl.StringVar(&f.spoolBind, "spool-bind", "", "endpoint the spool server binds (default: the gossip host, port 0)")
	fl.StringVar(&f.advertise, "spool-advertise", "", "spool endpoint to advertise, if not the bound one")
	fl.StringVar(&f.http, "http", "", "serve the web console at /, /status and /metrics on HOST:PORT, advertised in gossip")
	fl.StringVar(&f.http, "metrics", "", "alias of --http")
	fl.StringVar(&f.sync, "sync", "group", "spool sync policy: each, group or none")
	fl.StringVar(&f.codec, "codec", "s2", "spool batch codec: none, s2 or zstd")
	fl.DurationVar(&f.retAge, "retention-age", 0, "delete spool segments whose newest record is older than this (0: keep)")
	fl.Int64Var(&f.retBytes, "retention-bytes", 0, "keep each stream's spool under this many bytes, oldest segments first (0: no limit)")
	fl.DurationVar(&f.dedupWin, "dedup-window", 0, "how long a record's message id (fastmq-msg-id) is remembered to refuse a duplicate append (0: 2m; negative: ids are not looked at)")
	fl.BoolVar(&f.interest, "interest-retention", false, "keep records until every consumer group of the stream acknowledged them (capped by --retention-age and --retention-bytes)")
	fl.BoolVar(&f.leaseSync, "group-lease-after-sync", false, "consumer groups lease a record only once it is durable (by default once written, before its fsync: publishes are still acknowledged once durable, and only an OS crash can take records a member received)")
	fl.BoolVar(&f.early, "visible-before-sync", false, "serve records to pull consumers once written, before their fsync (publishes are still acknowledged once durable; an OS crash can lose records consumers saw, which they learn through a new epoch, as consumer groups do)")
	// The option's old name on nodes; bench always called it
	// --visible-before-sync, as spool.Config does.
	fl.BoolVar(&f.early, "deliver-before-sync", false, "old name of --visible-before-sync")
	_ = fl.MarkDeprecated("deliver-before-sync", "use --visible-before-sync")
	fl.BoolVar(&f.noIPC, "no-local-ipc", false, "keep RPC (serve, call) on tcp: by default a served service also listens on the unix socket twin of its tcp endpoint, and calls to instances on this host go over their twins")
	fl.DurationVar(&f.minSync, "min-sync-interval", 0, "least time between the starts of two of a stream's fsyncs (0: 500µs, or 2ms with --visible-before-sync; negative: back to back); caps the fsyncs per second a steady stream costs (a virtual or cloud disk that gets more stalls, and can stall the whole VM), at the price of publish acknowledgement latency; consumer groups do not wait for it, nor does any consumer with --visible-before-sync")
	fl.Int64Var(&f.diskMax, "disk-max-bytes", 0, "disk guard: refuse appends (or drop, see --disk-policy) once all streams' spools hold this many bytes (0: no limit)")
	fl.Int64Var(&f.diskFree, "disk-min-free-bytes", 0, "disk guard: keep this many bytes free on the data directory's disk (0: none in bytes)")
	fl.Float64Var(&f.diskPct, "disk-min-free-percent", 5, "disk guard: keep this share of the data directory's disk free, in percent (0: none)")
	fl.StringVar(&f.diskDrop, "disk-policy", "refuse", "disk guard policy when a limit is reached: refuse (appends fail with a disk full error) or drop-oldest (delete the oldest segments of the largest streams)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log at debug level")
	f.sec.register(fl)
	f.httpAuth.register(fl)
}

func (f *nodeFlags) config() (fastmq.Config, error) {
	var cfg fastmq.Config
	if f.name == "" {
		return cfg, fmt.Errorf("--%s is required", f.nameFlag)
	}
	if f.data == "" {
		return cfg, errors.New("--data is required")
	}
	if f.gossip != "" {
		if _, _, err := net.SplitHostPort(f.gossip); err != nil {
			return cfg, fmt.Errorf("--gossip %q: %w", f.gossip, err)
		}
	}
	if f.gossipAdv != "" {
		if _, _, err := net.SplitHostPort(f.gossipAdv); err != nil {
			return cfg, fmt.Errorf("--gossip-advertise %q: %w", f.gossipAdv, err)
		}
	}
	if f.retAge < 0 {
		return cfg, fmt.Errorf("--retention-age %v: must not be negative", f.retAge)
	}
	if f.retBytes < 0 {
		return cfg, fmt.Errorf("--retention-bytes %d: must not be negative", f.retBytes)
	}
	guard, err := f.diskGuard()
	if err != nil {
		return cfg, err
	}
	for _, j := range f.join {
		if _, _, err := net.SplitHostPort(j); err != nil {
			return cfg, fmt.Errorf("--join %q: %w", j, err)
		}
	}
	var key []byte
	if f.key != "" {
		k, err := base64.StdEncoding.DecodeString(f.key)
		if err != nil {
			return cfg, fmt.Errorf("--key is not base64: %w", err)
		}
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return cfg, fmt.Errorf("--key decodes to %d bytes, want 16, 24 or 32", n)
		}
		key = k
	}
	sp, err := spool.ParseSyncPolicy(f.sync)
	if err != nil {
		return cfg, fmt.Errorf("--sync: %w", err)
	}
	codec, err := spool.ParseCodec(f.codec)
	if err != nil {
		return cfg, fmt.Errorf("--codec: %w", err)
	}
	level := f.logLevel
	if f.verbose {
		level = slog.LevelDebug
	}
	var spoolEPs []string
	if f.spoolBind != "" {
		spoolEPs = []string{f.spoolBind}
	}
	cfg = fastmq.Config{
		Name:                f.name,
		DataDir:             f.data,
		GossipAddr:          f.gossip,
		AdvertiseAddr:       f.gossipAdv,
		Seeds:               f.join,
		RetryJoin:           true,
		Key:                 key,
		GossipPlaintext:     f.plaintext,
		SpoolEndpoints:      spoolEPs,
		SpoolAdvertise:      f.advertise,
		Spool:               spool.Config{Sync: sp, Codec: codec, RetentionAge: f.retAge, RetentionBytes: f.retBytes, DedupWindow: f.dedupWin, VisibleBeforeSync: f.early, MinSyncInterval: f.minSync},
		Interest:            fastmq.InterestConfig{Retain: f.interest},
		GroupLeaseAfterSync: f.leaseSync,
		DiskGuard:           guard,
		NoLocalIPC:          f.noIPC,
		Logger:              slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	}
	if err := f.sec.apply(&cfg); err != nil {
		return fastmq.Config{}, err
	}
	return cfg, nil
}

// runNode starts a node from the flags, runs fn with it, then shuts the
// node down gracefully with a deadline.
func (f *nodeFlags) runNode(ctx context.Context, fn func(ctx context.Context, n *fastmq.Node) error) error {
	cfg, err := f.config()
	if err != nil {
		return err
	}
	n, err := fastmq.New(cfg)
	if err != nil {
		return err
	}
	if n.SpoolOpen() {
		cfg.Logger.Warn("secure the spool port: --curve-key FILE.key (from fastmq keygen) with --curve-allow for the clients' keys, and --acl FILE for which client reads which stream; see docs/security.md")
	}
	var srv *http.Server
	var con *console.Console
	if f.http != "" {
		ln, err := net.Listen("tcp", f.http)
		if err != nil {
			n.Close()
			return fmt.Errorf("--http %q: %w", f.http, err)
		}
		ccfg := console.Config{Node: n, Logger: cfg.Logger}
		err = f.httpAuth.apply(&ccfg, f.http, cfg.ACL != nil)
		if err == nil {
			con, err = console.New(ccfg)
		}
		if err == nil {
			err = n.AdvertiseHTTP(ln.Addr().String())
		}
		if err != nil {
			ln.Close()
			n.Close()
			return err
		}
		srv = &http.Server{Handler: con.Handler(), ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		cfg.Logger.Info("serving the console", "endpoint", "http://"+ln.Addr().String()+"/")
	}
	// A node whose name turns out to be taken stops gossiping: nobody
	// finds it any more, so the command ends, with that error.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go func() {
		select {
		case <-n.Membership().Stopped():
			stop(n.Membership().Err())
		case <-ctx.Done():
		}
	}()
	runErr := fn(ctx, n)
	if cause := context.Cause(ctx); errors.Is(cause, discovery.ErrNameTaken) {
		runErr = cause
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if srv != nil {
		srv.Shutdown(sctx)
		con.Close()
	}
	if err := n.Shutdown(sctx); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

func init() {
	var nf nodeFlags
	agent := &cobra.Command{
		Use:   "agent",
		Short: "Run a node: gossip, spool server and metrics until SIGINT/SIGTERM",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return nf.runNode(cmd.Context(), func(ctx context.Context, n *fastmq.Node) error {
				fmt.Fprintf(cmd.OutOrStdout(), "node %s gossip %s spool %s\n", n.Name(), n.GossipAddr(), n.SpoolEndpoint())
				<-ctx.Done()
				return nil
			})
		},
	}
	nf.register(agent, "name", hostnameOr("agent"))
	rootCmd.AddCommand(agent)
}

func hostnameOr(def string) string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return def
	}
	return strings.SplitN(h, ".", 2)[0]
}

// diskGuard returns the node's disk guard from the --disk-* flags.
func (f *nodeFlags) diskGuard() (fastmq.DiskGuard, error) {
	g := fastmq.DiskGuard{MaxBytes: f.diskMax, MinFreeBytes: f.diskFree, MinFreePercent: f.diskPct}
	switch {
	case f.diskMax < 0:
		return g, fmt.Errorf("--disk-max-bytes %d: must not be negative", f.diskMax)
	case f.diskFree < 0:
		return g, fmt.Errorf("--disk-min-free-bytes %d: must not be negative", f.diskFree)
	case f.diskPct < 0 || f.diskPct >= 100:
		return g, fmt.Errorf("--disk-min-free-percent %g: want 0 to 100", f.diskPct)
	case f.diskPct == 0:
		g.MinFreePercent = -1 // none; the zero value means the default
	}
	switch f.diskDrop {
	case "refuse":
		g.Policy = fastmq.DiskRefuse
	case "drop-oldest":
		g.Policy = fastmq.DiskDropOldest
	default:
		return g, fmt.Errorf("--disk-policy %q: want refuse or drop-oldest", f.diskDrop)
	}
	return g, nil
}
