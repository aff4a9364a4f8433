package main

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// curveMesh is a publisher of stream "events" (records "alpha", "beta")
// with a CURVE key, encrypted gossip and the ACL aclText (%[1]s, %[2]s
// and %[3]s stand for the public keys reader, lister and admin, whose
// key files are in dir).
type curveMesh struct {
	dir, gossip, key string
	pub              *cliProc
}

func startCurveMesh(t *testing.T, aclText string) *curveMesh {
	t.Helper()
	m := &curveMesh{dir: t.TempDir(), gossip: freePort(t), key: base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))}
	writeKeys(t, m.dir, "pub")
	reader := writeKeys(t, m.dir, "reader")
	lister := writeKeys(t, m.dir, "lister")
	admin := writeKeys(t, m.dir, "admin")
	writeKeys(t, m.dir, "other")
	acl := filepath.Join(m.dir, "spool.acl")
	if err := os.WriteFile(acl, []byte(fmt.Sprintf(aclText, reader.Z85(), lister.Z85(), admin.Z85())), 0o644); err != nil {
		t.Fatal(err)
	}
	m.pub = startCLI(t, "publish", "--name", "pub-1", "--data", filepath.Join(m.dir, "pubdata"), "--gossip", m.gossip, "--key", m.key,
		"--curve-key", filepath.Join(m.dir, "pub.key"), "--acl", acl, "--stream", "events", "--ack")
	m.pub.feed("alpha", "beta")
	for i := range 2 {
		if got := m.pub.line(); got != fmt.Sprint(i) {
			t.Fatalf("ack %d: got %q\n%s", i, got, m.pub.stderr())
		}
	}
	return m
}

// client runs a fastmq command that joins m (a data directory of its
// own, its gossip key, the key file of who unless who is "").
func (m *curveMesh) client(t *testing.T, who string, args ...string) *cliProc {
	t.Helper()
	args = append(args, "--data", filepath.Join(m.dir, "c-"+fmt.Sprint(len(args))+"-"+who+"-"+args[0]), "--join", m.gossip)
	if !strings.Contains(strings.Join(args, " "), "--key") {
		args = append(args, "--key", m.key)
	}
	if who != "" {
		args = append(args, "--curve-key", filepath.Join(m.dir, who+".key"))
	}
	return startCLI(t, args...)
}

// refused runs a command that must end at once, failing, with want on
// its stdout (a group command's row) or stderr.
func (m *curveMesh) refused(t *testing.T, want, who string, args ...string) {
	t.Helper()
	p := m.client(t, who, args...)
	out, err := p.wait() // fails the test on a command that does not end
	if err == nil || !strings.Contains(strings.Join(out, "\n")+p.stderr(), want) {
		t.Errorf("%v as %q: printed %q, %v, want a failure saying %q\n%s", args, who, out, err, want, p.stderr())
	}
}

// TestCLIRefusalsEndCommands proves a permanent refusal ends a command
// with its reason and a non-zero status instead of retrying for ever:
// consume with a wrong gossip key, consume without a CURVE key in a
// CURVE mesh, and consume --group on a stream the ACL refuses (which
// used to log and run on, while plain consume exited 1).
func TestCLIRefusalsEndCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	m := startCurveMesh(t, "fastmq-acl 1\nallow %s events\n# %s %s\n")
	wrong := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("w", 32)))
	m.refused(t, "cannot join the mesh", "reader", "consume", "--stream", "events", "--name", "r", "--count", "1", "--key", wrong)
	m.refused(t, "cannot connect securely", "", "consume", "--stream", "events", "--name", "r", "--count", "1")
	m.refused(t, "cannot connect securely", "", "consume", "--stream", "events", "--group", "g", "--count", "1")
	m.refused(t, "forbidden: this client may not read stream", "other", "consume", "--stream", "events", "--group", "g", "--count", "1")
	// What is allowed still runs.
	ok := m.client(t, "reader", "consume", "--stream", "events", "--group", "g", "--count", "2")
	if out, err := ok.wait(); err != nil || strings.Join(out, ",") != "alpha,beta" {
		t.Fatalf("the reader's member printed %q, %v\n%s", out, err, ok.stderr())
	}
}

// TestCLIACLGrants proves the ACL's version 2 grants reach the group
// commands: a list grant lists every group, a read grant lists the
// groups of its stream but not every stream's and may not seek, an admin
// grant seeks; and a command without a CURVE key in a CURVE mesh says so
// instead of ending in a socket timeout.
func TestCLIACLGrants(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	m := startCurveMesh(t, "fastmq-acl 2\nallow read %s events\nallow list %s *\nallow admin %s events\n")
	member := m.client(t, "reader", "consume", "--stream", "events", "--group", "g", "--count", "2")
	if out, err := member.wait(); err != nil || strings.Join(out, ",") != "alpha,beta" {
		t.Fatalf("the reader's member printed %q, %v\n%s", out, err, member.stderr())
	}
	ls := func(who string, args ...string) {
		t.Helper()
		p := m.client(t, who, append([]string{"group", "ls", "--json"}, args...)...)
		out, err := p.wait()
		if err != nil || !strings.Contains(strings.Join(out, "\n"), `"group": "g"`) {
			t.Errorf("group ls %v as %s: %q, %v\n%s", args, who, out, err, p.stderr())
		}
	}
	ls("lister")
	ls("reader", "--stream", "events")
	ls("admin", "--stream", "events")
	m.refused(t, `may not list stream "*"`, "reader", "group", "ls")
	m.refused(t, `may not administer stream "events"`, "reader", "group", "seek", "--stream", "events", "--group", "g", "--to", "earliest")
	m.refused(t, `may not administer stream "events"`, "lister", "group", "seek", "--stream", "events", "--group", "g", "--to", "earliest")
	seek := m.client(t, "admin", "group", "seek", "--stream", "events", "--group", "g", "--to", "earliest")
	if out, err := seek.wait(); err != nil {
		t.Errorf("seek as admin: %q, %v\n%s", out, err, seek.stderr())
	}
	m.refused(t, "cannot connect securely", "", "group", "ls")
}
