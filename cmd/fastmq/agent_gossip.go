package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq/discovery"
)

// gossipLeaveTimeout bounds the graceful leave after a signal.
const gossipLeaveTimeout = 10 * time.Second

// runGossipAgent runs a gossip-only node (no spool, no sockets) until ctx is
// cancelled, then leaves the mesh gracefully so others report it left.
func runGossipAgent(ctx context.Context, cfg discovery.Config, out io.Writer) error {
	m, err := discovery.New(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "node %s gossip %s\n", m.Name(), m.GossipAddr())
	<-ctx.Done()
	lctx, cancel := context.WithTimeout(context.Background(), gossipLeaveTimeout)
	defer cancel()
	return m.Leave(lctx)
}

// gossipFlags are the flags shared by the gossip commands.
type gossipFlags struct {
	name      string
	bind      string
	advertise string
	join      []string
	key       string
	profile   string
	plaintext bool
	retry     bool
	verbose   bool
}

func (f *gossipFlags) config() (discovery.Config, error) {
	cfg := discovery.Config{
		NodeName:       f.name,
		BindAddr:       f.bind,
		AdvertiseAddr:  f.advertise,
		Seeds:          f.join,
		RetryJoin:      f.retry,
		AllowPlaintext: f.plaintext,
	}
	if f.name == "" {
		return cfg, fmt.Errorf("--name is required")
	}
	switch f.profile {
	case "lan":
		cfg.Profile = discovery.ProfileLAN
	case "local":
		cfg.Profile = discovery.ProfileLocal
	case "":
		cfg.Profile = discovery.ProfileAuto // by the bind address
	default:
		return cfg, fmt.Errorf("--profile must be lan or local, got %q", f.profile)
	}
	if f.key != "" {
		k, err := base64.StdEncoding.DecodeString(f.key)
		if err != nil {
			return cfg, fmt.Errorf("--key is not valid base64: %v", err)
		}
		cfg.Key = k
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	return cfg, nil
}

func (f *gossipFlags) registerKey(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.key, "key", "", "gossip encryption key, base64 of 16, 24 or 32 bytes (required for gossip beyond loopback, unless --plaintext-gossip)")
	fl.BoolVar(&f.plaintext, "plaintext-gossip", false, "allow unencrypted gossip on an address that is not loopback (trusted networks only)")
	fl.StringVar(&f.profile, "profile", "", "gossip timers: lan or local (default: local for a loopback address)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log gossip at debug level")
}

func init() {
	var f gossipFlags
	cmd := &cobra.Command{
		Use:   "gossip",
		Short: "Run a gossip-only node (no spool) until SIGINT/SIGTERM, then leave gracefully",
		Long: "Run a gossip-only node: it joins the mesh and relays membership but serves " +
			"nothing. On SIGINT or SIGTERM it leaves, so the others report it left, not failed.",
		Example: "  fastmq gossip --name seed --gossip 127.0.0.1:7946\n" +
			"  fastmq gossip --name n2 --gossip 127.0.0.1:0 --join 127.0.0.1:7946",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config()
			if err != nil {
				return err
			}
			return runGossipAgent(cmd.Context(), cfg, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", hostnameOr("gossip"), "node name, unique in the mesh and stable across restarts")
	fl.StringVar(&f.bind, "gossip", "127.0.0.1:7946", "gossip bind address HOST:PORT (port 0 picks one)")
	fl.StringVar(&f.advertise, "advertise", "", "gossip address HOST:PORT others should use, if not the bound one")
	fl.StringSliceVar(&f.join, "join", nil, "gossip address of a node to join (repeatable)")
	fl.BoolVar(&f.retry, "retry-join", false, "keep retrying --join in the background instead of failing")
	f.registerKey(cmd)
	rootCmd.AddCommand(cmd)
}
