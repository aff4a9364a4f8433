package fastmq_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
)

// TestOpenSpoolWarns proves a node that gossips and serves its spool beyond
// loopback with neither a CURVE key nor an ACL says so at WARN at start,
// and that one on loopback, one with a CURVE key and one with an ACL do
// not. The wildcard address binds every interface; nothing is sent.
func TestOpenSpoolWarns(t *testing.T) {
	_, secret, err := socket.NewCurveKeypair()
	if err != nil {
		t.Fatal(err)
	}
	acl, err := pull.ParseACL([]byte("fastmq-acl 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	wild := func(c fastmq.Config) fastmq.Config {
		c.GossipAddr, c.Key, c.SpoolEndpoints = "0.0.0.0:0", make([]byte, 16), []string{"tcp://0.0.0.0:0"}
		return c
	}
	for _, tc := range []struct {
		name string
		cfg  fastmq.Config
		warn bool
	}{
		{"open beyond loopback", wild(fastmq.Config{}), true},
		{"loopback", fastmq.Config{}, false},
		{"curve", wild(fastmq.Config{CurveKey: secret}), false},
		{"acl", wild(fastmq.Config{ACL: acl}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuffer
			cfg := tc.cfg
			cfg.Name, cfg.DataDir = "n", t.TempDir()
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			n, err := fastmq.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			warned := strings.Contains(logs.String(), `level=WARN msg="spool server open to the network`)
			if warned != tc.warn || n.SpoolOpen() != tc.warn {
				t.Fatalf("warned %v, SpoolOpen %v, want %v; log:\n%s", warned, n.SpoolOpen(), tc.warn, logs.String())
			}
		})
	}
}
