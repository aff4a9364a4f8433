package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
)

// nodeSecFlags are the security flags of every command that runs a node.
type nodeSecFlags struct {
	curveKey   string // the node's secret key file
	curveAllow string // a .pub file or a directory of them: pinned keys
	acl        string // the spool server's ACL file
}

func (f *nodeSecFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.curveKey, "curve-key", "", "the node's CURVE secret key `FILE.key` (fastmq keygen --out NAME; mode 0600): the spool server and served sockets speak CURVE, consumers and callers connect with each peer's gossiped key")
	fl.StringVar(&f.curveAllow, "curve-allow", "", "with --curve-key: trust the public keys in `FILE|DIR` (a .pub file or a directory of them); without --key (unencrypted gossip) only such pinned keys are trusted")
	fl.StringVar(&f.acl, "acl", "", "spool server access control: the ACL `FILE` (first line \"fastmq-acl 2\", then \"allow read|list|admin CLIENT STREAM-PATTERN...\" lines) says which client keys or PLAIN users read, list the groups of, or administer (seek, replay) which streams")
}

// apply loads the files the flags name into cfg, with errors that name
// the flag.
func (f *nodeSecFlags) apply(cfg *fastmq.Config) error {
	if f.curveAllow != "" && f.curveKey == "" {
		return errors.New("--curve-allow needs --curve-key")
	}
	if f.curveKey != "" {
		k, err := socket.LoadCurveSecretKey(f.curveKey)
		if err != nil {
			return fmt.Errorf("--curve-key %s: %w", f.curveKey, err)
		}
		cfg.CurveKey = k
	}
	if f.curveAllow != "" {
		st, err := os.Stat(f.curveAllow)
		if err != nil {
			return fmt.Errorf("--curve-allow: %w", err)
		}
		if st.IsDir() {
			if _, err := socket.NewCurveKeyDir(f.curveAllow); err != nil {
				return fmt.Errorf("--curve-allow %s: %w", f.curveAllow, err)
			}
		} else if _, err := socket.LoadCurvePublicKey(f.curveAllow); err != nil {
			return fmt.Errorf("--curve-allow %s: %w", f.curveAllow, err)
		}
		cfg.CurveAllow = f.curveAllow
	}
	if f.acl != "" {
		a, err := pull.LoadACL(f.acl)
		if err != nil {
			return fmt.Errorf("--acl: %w", err)
		}
		cfg.ACL = a
	}
	return nil
}
