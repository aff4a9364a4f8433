package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/internal/nodesec"
	"github.com/fastmq/fastmq/socket"
)

// observerFlags are the flags of a command that joins the mesh only to
// ask (group ls, dlq replay, ...): gossip, its key, and the CURVE key the
// spool servers see. It stores nothing, so it takes no data directory.
type observerFlags struct {
	gf         gossipFlags
	curveKey   string
	curveAllow string
	data       string // --data, accepted and unused (it was required)
}

func (f *observerFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVar(&f.gf.join, "join", nil, "gossip address of a mesh node (repeatable)")
	fl.StringVar(&f.gf.bind, "gossip", "", "bind address of the observer (default HOST:0 next to --join)")
	f.gf.registerKey(cmd)
	fl.StringVar(&f.curveKey, "curve-key", "", "CURVE secret key `FILE.key` to ask the spool servers with (fastmq keygen --out NAME; its public key gossiped, or allowed by theirs, and granted by their ACL)")
	fl.StringVar(&f.curveAllow, "curve-allow", "", "with --curve-key: trust the public keys in `FILE|DIR` (a .pub file or a directory of them); without --key only such pinned keys are trusted")
	fl.StringVar(&f.data, "data", "", "ignored: the command stores nothing")
	_ = fl.MarkHidden("data")
}

// security resolves the CURVE flags as a node would (nodesec), for
// client sockets only.
func (f *observerFlags) security(gossipEncrypted bool) (*nodesec.Security, error) {
	var cfg fastmq.Config
	sf := nodeSecFlags{curveKey: f.curveKey, curveAllow: f.curveAllow}
	if err := sf.apply(&cfg); err != nil {
		return nil, err
	}
	return nodesec.New(nodesec.Config{CurveKey: cfg.CurveKey, CurveAllow: cfg.CurveAllow, GossipEncrypted: gossipEncrypted})
}

// run joins the mesh as a short-lived observer named after role, host
// and process, tagged fastmq.ObserverTag so that no member list shows it
// (members, status, the console, and the members queries that leave out
// observers), and calls fn with its membership and the client socket
// settings its spool requests use (CURVE with --curve-key, trusting the
// keys the servers gossip). It leaves gracefully when fn returns.
func (f *observerFlags) run(ctx context.Context, role string, fn func(ctx context.Context, m *discovery.Membership, sock socket.Config) error) error {
	if len(f.gf.join) == 0 {
		return fmt.Errorf("--join is required")
	}
	if f.gf.bind == "" {
		f.gf.bind = observerBind(f.gf.join[0])
	}
	f.gf.name = fmt.Sprintf("%s-%s-%d", role, hostnameOr("cli"), os.Getpid())
	cfg, err := f.gf.config()
	if err != nil {
		return err
	}
	sec, err := f.security(cfg.Key != nil)
	if err != nil {
		return err
	}
	cfg.Tags = map[string]string{observerTag: "1"}
	cfg.CurveKey = sec.PublicZ85()
	m, err := discovery.New(cfg)
	if err != nil {
		return err
	}
	sec.SetMembers(m)
	defer func() {
		lctx, cancel := context.WithTimeout(context.Background(), gossipLeaveTimeout)
		defer cancel()
		m.Leave(lctx)
	}()
	return fn(ctx, m, sec.ClientSocket(socket.Config{}))
}
