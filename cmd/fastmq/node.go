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
	"github.com/fastmq/fastmq/spool"
)

// nodeFlags are the flags of every command that runs a node.
type nodeFlags struct {
	name      string
	data      string
	gossip    string
	join      []string
	key       string
	spoolBind string
	advertise string
	metrics   string
	sync      string
	codec     string
	verbose   bool
	nameFlag  string
}

func (f *nodeFlags) register(cmd *cobra.Command, nameFlag, defaultName string) {
	fl := cmd.Flags()
	f.nameFlag = nameFlag
	fl.StringVar(&f.name, nameFlag, defaultName, "node name, unique in the mesh and stable across restarts")
	fl.StringVar(&f.data, "data", "", "data directory for spools and offsets (required)")
	fl.StringVar(&f.gossip, "gossip", "127.0.0.1:0", "gossip bind address HOST:PORT")
	fl.StringSliceVar(&f.join, "join", nil, "gossip address of a node to join (repeatable)")
	fl.StringVar(&f.key, "key", "", "gossip encryption key, base64 of 16, 24 or 32 bytes")
	fl.StringVar(&f.spoolBind, "spool-bind", "tcp://127.0.0.1:0", "endpoint the spool server binds")
	fl.StringVar(&f.advertise, "spool-advertise", "", "spool endpoint to advertise, if not the bound one")
	fl.StringVar(&f.metrics, "metrics", "", "serve /metrics and /status on HOST:PORT")
	fl.StringVar(&f.sync, "sync", "group", "spool sync policy: each, group or none")
	fl.StringVar(&f.codec, "codec", "s2", "spool batch codec: none, s2 or zstd")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log at debug level")
}

func (f *nodeFlags) config() (fastmq.Config, error) {
	var cfg fastmq.Config
	if f.name == "" {
		return cfg, fmt.Errorf("--%s is required", f.nameFlag)
	}
	if f.data == "" {
		return cfg, errors.New("--data is required")
	}
	if _, _, err := net.SplitHostPort(f.gossip); err != nil {
		return cfg, fmt.Errorf("--gossip %q: %w", f.gossip, err)
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
	level := slog.LevelInfo
	if f.verbose {
		level = slog.LevelDebug
	}
	return fastmq.Config{
		Name:           f.name,
		DataDir:        f.data,
		GossipAddr:     f.gossip,
		Seeds:          f.join,
		RetryJoin:      true,
		Key:            key,
		SpoolEndpoints: []string{f.spoolBind},
		SpoolAdvertise: f.advertise,
		Spool:          spool.Config{Sync: sp, Codec: codec},
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	}, nil
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
	var srv *http.Server
	if f.metrics != "" {
		ln, err := net.Listen("tcp", f.metrics)
		if err != nil {
			n.Close()
			return fmt.Errorf("--metrics %q: %w", f.metrics, err)
		}
		srv = &http.Server{Handler: n.Handler(), ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		cfg.Logger.Info("serving metrics", "endpoint", "http://"+ln.Addr().String())
	}
	runErr := fn(ctx, n)
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if srv != nil {
		srv.Shutdown(sctx)
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
