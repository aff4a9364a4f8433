package main

import (
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIOpenSpoolWarns proves `fastmq agent` gossiping and serving its
// spool beyond loopback without --curve-key or --acl warns at start and
// names the flags that close the port; on loopback it does not. The
// wildcard address binds every interface; nothing is sent.
func TestCLIOpenSpoolWarns(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	key := base64.StdEncoding.EncodeToString(make([]byte, 16))
	for _, tc := range []struct {
		name string
		args []string
		warn bool
	}{
		{"wildcard", []string{"--gossip", "0.0.0.0:0", "--key", key, "--spool-bind", "tcp://0.0.0.0:0"}, true},
		{"loopback", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"agent", "--name", "a", "--data", filepath.Join(t.TempDir(), "a")}, tc.args...)
			p := startCLI(t, args...)
			if l := p.line(); !strings.HasPrefix(l, "node a ") { // printed once started, after any warning
				t.Fatalf("agent printed %q", l)
			}
			p.kill9()
			errs := p.stderr()
			warned := strings.Contains(errs, "level=WARN") && strings.Contains(errs, "--curve-key") && strings.Contains(errs, "--acl")
			if warned != tc.warn {
				t.Fatalf("warned %v, want %v:\n%s", warned, tc.warn, errs)
			}
		})
	}
}
