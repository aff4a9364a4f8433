package sockettest

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// Transports are the transports every socket test should cover.
var Transports = []string{"tcp", "ipc", "inproc"}

var seq atomic.Uint64

// Endpoint returns a fresh endpoint to Bind on transport tr ("tcp",
// "ipc" or "inproc"): tcp://127.0.0.1:0 (Bind resolves the port), a unix
// socket in a temporary directory removed at the end of the test, or a
// unique inproc name.
func Endpoint(t testing.TB, tr string) string {
	t.Helper()
	switch tr {
	case "tcp":
		return "tcp://127.0.0.1:0"
	case "ipc":
		// Unix socket paths are limited to ~100 bytes, so t.TempDir (which
		// embeds the test name) may be too long.
		dir, err := os.MkdirTemp("", "fmq")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return "ipc://" + filepath.Join(dir, fmt.Sprintf("s%d.sock", seq.Add(1)))
	case "inproc":
		return fmt.Sprintf("inproc://test-%d", seq.Add(1))
	}
	t.Fatalf("sockettest: unknown transport %q", tr)
	return ""
}

// Matrix runs f as one subtest per transport, passing a function that
// returns a fresh endpoint to Bind on that transport.
func Matrix(t *testing.T, f func(t *testing.T, endpoint func() string)) {
	t.Helper()
	for _, tr := range Transports {
		t.Run(tr, func(t *testing.T) {
			f(t, func() string { return Endpoint(t, tr) })
		})
	}
}
