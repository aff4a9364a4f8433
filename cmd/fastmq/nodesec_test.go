package main

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/socket"
)

// writeKeys writes NAME.key and NAME.pub into dir and returns the public
// key.
func writeKeys(t *testing.T, dir, name string) socket.CurveKey {
	t.Helper()
	pub, sec, err := socket.NewCurveKeypair()
	if err != nil {
		t.Fatal(err)
	}
	if err := socket.WriteCurveKeypair(filepath.Join(dir, name), pub, sec); err != nil {
		t.Fatal(err)
	}
	return pub
}

// TestNodeSecurityFlags: --curve-key, --curve-allow and --acl load into
// the node's Config, and nonsense is refused naming the flag and what is
// wrong.
func TestNodeSecurityFlags(t *testing.T) {
	dir := t.TempDir()
	pub := writeKeys(t, dir, "n")
	open := filepath.Join(dir, "open.key")
	if err := os.WriteFile(open, []byte(pub.Z85()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	acl := filepath.Join(dir, "ok.acl")
	if err := os.WriteFile(acl, []byte("fastmq-acl 1\nallow "+pub.Z85()+" logs-*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.acl")
	if err := os.WriteFile(bad, []byte("fastmq-acl 1\nallow someone logs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) (fastmq.Config, error) { return parseNodeFlags(t, args...) }
	cfg, err := parse("--curve-key", filepath.Join(dir, "n.key"), "--curve-allow", dir, "--acl", acl)
	if err != nil {
		t.Fatal(err)
	}
	if socket.CurvePublicKey(cfg.CurveKey) != pub || cfg.CurveAllow != dir || cfg.ACL == nil || len(cfg.ACL.Rules) != 1 {
		t.Fatalf("config %+v", cfg)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--curve-key", filepath.Join(dir, "none.key")}, []string{"--curve-key", "no such file"}},
		{[]string{"--curve-key", open}, []string{"--curve-key", "readable by others", "chmod 600"}},
		{[]string{"--curve-key", filepath.Join(dir, "n.pub")}, []string{"--curve-key", "readable by others"}},
		{[]string{"--curve-allow", dir}, []string{"--curve-allow needs --curve-key"}},
		{[]string{"--curve-key", filepath.Join(dir, "n.key"), "--curve-allow", filepath.Join(dir, "none")}, []string{"--curve-allow", "no such file"}},
		{[]string{"--curve-key", filepath.Join(dir, "n.key"), "--curve-allow", acl}, []string{"--curve-allow", "ok.acl"}},
		{[]string{"--acl", bad}, []string{"--acl", "bad.acl", "line 2", `client "someone"`}},
		{[]string{"--acl", filepath.Join(dir, "none.acl")}, []string{"--acl", "no such file"}},
	} {
		_, err := parse(tc.args...)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v, want an error with %q", tc.args, err, w)
			}
		}
	}
}

// TestCLICurveAgentACL: a publisher run with --curve-key and --acl, and
// consumers with --curve-key in an encrypted mesh: the key the ACL names
// reads the stream, another key fails with a forbidden error naming the
// stream instead of waiting forever.
func TestCLICurveAgentACL(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	writeKeys(t, dir, "pub")
	reader := writeKeys(t, dir, "reader")
	writeKeys(t, dir, "other")
	acl := filepath.Join(dir, "spool.acl")
	if err := os.WriteFile(acl, []byte(fmt.Sprintf("fastmq-acl 1\n# the reader reads events\nallow %s events\n", reader.Z85())), 0o644); err != nil {
		t.Fatal(err)
	}
	key := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	gossip := freePort(t)
	pub := startCLI(t, "publish", "--name", "pub-1", "--data", filepath.Join(dir, "pubdata"), "--gossip", gossip, "--key", key,
		"--curve-key", filepath.Join(dir, "pub.key"), "--acl", acl, "--stream", "events", "--ack")
	pub.feed("alpha", "beta")
	for i := range 2 {
		if got := pub.line(); got != fmt.Sprint(i) {
			t.Fatalf("ack %d: got %q\n%s", i, got, pub.stderr())
		}
	}
	ok := startCLI(t, "consume", "--data", filepath.Join(dir, "ok"), "--join", gossip, "--key", key,
		"--curve-key", filepath.Join(dir, "reader.key"), "--stream", "events", "--name", "r", "--count", "2")
	if out, err := ok.wait(); err != nil || strings.Join(out, ",") != "alpha,beta" {
		t.Fatalf("the reader printed %q, %v\n%s", out, err, ok.stderr())
	}
	no := startCLI(t, "consume", "--data", filepath.Join(dir, "no"), "--join", gossip, "--key", key,
		"--curve-key", filepath.Join(dir, "other.key"), "--stream", "events", "--name", "r", "--count", "2")
	out, err := no.wait()
	if err == nil || len(out) != 0 || !strings.Contains(no.stderr(), "forbidden: this client may not read stream") || !strings.Contains(no.stderr(), "stopped pulling events from pub-1") {
		t.Fatalf("another key: printed %q, %v\n%s", out, err, no.stderr())
	}
	pub.cmd.Process.Signal(os.Interrupt)
	if _, err := pub.wait(); err != nil {
		t.Fatalf("publish: %v\n%s", err, pub.stderr())
	}
}
