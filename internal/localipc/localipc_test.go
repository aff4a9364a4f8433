package localipc

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastmq/fastmq/internal/testutil"
)

func TestPath(t *testing.T) {
	for _, c := range []struct {
		ep, name string
		ok       bool
	}{
		{"tcp://127.0.0.1:5555", "tcp-127.0.0.1-5555.sock", true},
		{"tcp://[::1]:80", "tcp-__1-80.sock", true},
		{"tcp://[fe80::1%eth0]:80", "tcp-fe80__1_eth0-80.sock", true},
		{"tcp://node-a.example:9000", "tcp-node-a.example-9000.sock", true},
		{"tcp://0.0.0.0:7", "tcp-any-7.sock", true},
		{"tcp://[::]:7", "tcp-any-7.sock", true},
		{"tcp://*:7", "tcp-any-7.sock", true},
		{"tcp://127.0.0.1:007", "tcp-127.0.0.1-7.sock", true},
		{"tcp://127.0.0.1:1/../../x/y", "", false},
		{"tcp://..:5", "", false},
		{"tcp://127.0.0.1:65536", "", false},
		{"tcp://127.0.0.1:-1", "", false},
		{"tcp://127.0.0.1:0", "", false},
		{"tcp://127.0.0.1:*", "", false},
		{"tcp://127.0.0.1", "", false},
		{"ipc:///tmp/x.sock", "", false},
		{"inproc://x", "", false},
	} {
		p, ok := Path("/d", c.ep)
		if c.ok {
			c.name = strings.TrimSuffix(c.name, ".sock") + netSuffix() + ".sock"
		}
		if ok != c.ok || (ok && p != "/d/"+c.name) {
			t.Errorf("Path(%q) = %q, %v; want /d/%s, %v", c.ep, p, ok, c.name, c.ok)
		}
	}
	if p, ok := Path("/"+strings.Repeat("d", 100), "tcp://127.0.0.1:5555"); ok {
		t.Errorf("Path in a long directory = %q, want none: too long for a unix socket", p)
	}
	if p, ok := Path("rel", "tcp://127.0.0.1:5555"); ok {
		t.Errorf("Path in a relative directory = %q, want none", p)
	}
}

// TestPrivate checks what counts as a private directory.
func TestPrivate(t *testing.T) {
	if !Supported() {
		t.Skip("no twins on this system")
	}
	dir := testutil.ShortDir(t)
	if err := Private(dir); err != nil {
		t.Fatalf("a 0700 directory of ours: %v", err)
	}
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o775); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{open, link, file, filepath.Join(dir, "missing")} {
		if err := Private(p); err == nil {
			t.Errorf("Private(%s) = nil, want an error", filepath.Base(p))
		}
	}
	if os.Getuid() == 0 {
		theirs := filepath.Join(dir, "theirs")
		if err := os.Mkdir(theirs, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := Private(theirs); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Errorf("Private of another user's directory = %v, want it refused", err)
		}
	}
	made := filepath.Join(dir, "made")
	if err := Prepare(made); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if st, err := os.Stat(made); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("Prepare made %v, %v; want a 0700 directory", st, err)
	}
	if err := Prepare("relative"); err == nil {
		t.Fatal("Prepare of a relative path: nil error")
	}
}

// TestFind checks that Find returns a twin only when its socket file is
// there, is a socket and no link, in a private directory.
func TestFind(t *testing.T) {
	if !Supported() {
		t.Skip("no twins on this system")
	}
	dir := testutil.ShortDir(t)
	a, b := "tcp://127.0.0.1:1001", "tcp://127.0.0.1:1002"
	pa, _ := Path(dir, a)
	pb, _ := Path(dir, b)
	if ep, _, ok := Find(dir, []string{a, b}); ok {
		t.Fatalf("Find with no twin = %q", ep)
	}
	if err := os.WriteFile(pa, nil, 0o600); err != nil { // no socket
		t.Fatal(err)
	}
	if ep, _, ok := Find(dir, []string{a}); ok {
		t.Fatalf("Find of a plain file = %q", ep)
	}
	l, err := net.Listen("unix", pb)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if ep, of, ok := Find(dir, []string{"inproc://x", a, b}); !ok || ep != "ipc://"+pb || of != b {
		t.Fatalf("Find = %q for %q, %v; want ipc://%s for %s", ep, of, ok, pb, b)
	}
	// A link to a socket is not a twin.
	os.Remove(pa)
	if err := os.Symlink(pb, pa); err != nil {
		t.Fatal(err)
	}
	if ep, _, ok := Find(dir, []string{a}); ok {
		t.Fatalf("Find of a link = %q", ep)
	}
	// A listener on every address stands for each address of the host.
	any, _ := Path(dir, "tcp://0.0.0.0:1003")
	la, err := net.Listen("unix", any)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Close()
	if ep, of, ok := Find(dir, []string{"tcp://127.0.0.1:1003"}); !ok || ep != "ipc://"+any || of != "tcp://127.0.0.1:1003" {
		t.Fatalf("Find of a loopback endpoint with a twin on every address = %q, %q, %v; want %s", ep, of, ok, any)
	}
	if ep, _, ok := Find(dir, []string{"tcp://192.0.2.1:1003"}); ok { // TEST-NET-1: no address of ours
		t.Fatalf("Find of another host's endpoint = %q, want none", ep)
	}
	// Nor is anything in a directory others may write to.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if ep, _, ok := Find(dir, []string{b}); ok {
		t.Fatalf("Find in an open directory = %q", ep)
	}
}
