package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/fastmq/fastmq/console"
)

// httpAuthFlags are the flags of the node's HTTP side's authentication.
type httpAuthFlags struct {
	tokens    string // --http-tokens: who may call, as ACL clients
	peerToken string // --http-peer-token: what this node presents to others
}

func (f *httpAuthFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.tokens, "http-tokens", "", "HTTP bearer tokens `FILE` (lines TOKEN CLIENT, CLIENT as in the ACL: user:NAME or a CURVE public key): /status, /metrics, the console and its peek obey --acl for the token's client; required with --acl for --http beyond loopback")
	fl.StringVar(&f.peerToken, "http-peer-token", "", "`FILE` holding the bearer token this node's console presents to the other nodes' --http (their --http-tokens)")
}

// apply sets the console's authentication from the flags, and refuses a
// node with an ACL that would serve HTTP beyond loopback to anyone who
// asks: its spool port refuses such clients.
func (f *httpAuthFlags) apply(cfg *console.Config, httpAddr string, hasACL bool) error {
	if f.tokens != "" {
		t, err := console.LoadTokens(f.tokens)
		if err != nil {
			return fmt.Errorf("--http-tokens: %w", err)
		}
		cfg.Tokens = t
	}
	if f.peerToken != "" {
		b, err := os.ReadFile(f.peerToken)
		if err != nil {
			return fmt.Errorf("--http-peer-token: %w", err)
		}
		cfg.PeerToken = strings.TrimSpace(string(b))
	}
	if hasACL && cfg.Tokens == nil && !loopbackAddr(httpAddr) {
		return errors.New("--http " + httpAddr + " is beyond loopback on a node with --acl: give --http-tokens (HTTP would otherwise show every stream to anyone the spool port refuses), or bind --http to loopback")
	}
	return nil
}

// loopbackAddr reports whether a listen address HOST:PORT binds
// loopback only.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
