package discovery

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReachable checks which advertised endpoints a socket here connects
// to: a live unix socket alone when there is one, else everything but the
// ipc endpoints (missing paths, and paths that are no socket).
func TestReachable(t *testing.T) {
	// Unix socket paths are short: not under t.TempDir.
	dir, err := os.MkdirTemp("", "fq")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	plain := filepath.Join(dir, "f.sock")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	live, missing, notSock := "ipc://"+sock, "ipc://"+filepath.Join(dir, "gone.sock"), "ipc://"+plain
	tcp := "tcp://127.0.0.1:5555"
	for _, c := range []struct {
		name string
		eps  []string
		want []string
	}{
		{"tcp only", []string{tcp}, []string{tcp}},
		{"local socket first", []string{tcp, live}, []string{live}},
		{"missing socket", []string{tcp, missing}, []string{tcp}},
		{"file that is no socket", []string{notSock, tcp}, []string{tcp}},
		{"only unreachable ipc", []string{missing}, nil},
		{"live among dead", []string{missing, live, tcp}, []string{live}},
		{"inproc kept", []string{"inproc://x", missing}, []string{"inproc://x"}},
	} {
		if got := Reachable(c.eps); !slices.Equal(got, c.want) {
			t.Errorf("%s: Reachable(%q) = %q, want %q", c.name, c.eps, got, c.want)
		}
	}
}
