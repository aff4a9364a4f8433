package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLISpool drives the spool tools end to end: append with --ack, read
// by offset and as JSON, stats, verify on a clean and a damaged spool, and
// repair.
func TestCLISpool(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "stream")
	app := startCLI(t, "spool", "append", "--dir", dir, "--codec", "zstd", "--sync", "each", "--ack")
	var lines []string
	for i := 0; i < 50; i++ {
		lines = append(lines, fmt.Sprintf("record %d", i))
	}
	app.feed(lines...)
	for i := 0; i < 50; i++ {
		if got := app.line(); got != fmt.Sprint(i) {
			t.Fatalf("ack %d: %q", i, got)
		}
	}
	app.closeStdin()
	app.mustSucceed()

	out := startCLI(t, "spool", "read", "--dir", dir, "--from", "45").mustSucceed()
	wantOut(t, "read --from 45", out, lines[45:]...)

	out = startCLI(t, "spool", "read", "--dir", dir, "--count", "1", "--json").mustSucceed()
	if len(out) != 1 || !strings.Contains(out[0], `"offset":0`) || !strings.Contains(out[0], `"value":"record 0"`) {
		t.Fatalf("read --json: %q", out)
	}

	stats := strings.Join(startCLI(t, "spool", "stats", "--dir", dir).mustSucceed(), "\n")
	for _, want := range []string{"50", "zstd"} {
		if !strings.Contains(stats, want) {
			t.Fatalf("stats lack %q:\n%s", want, stats)
		}
	}
	startCLI(t, "spool", "verify", "--dir", dir).mustSucceed()

	// Flip a byte in the middle of the only segment: verify must fail and
	// name the damage.
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments: %v", segs)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[200] ^= 0xff
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	v := startCLI(t, "spool", "verify", "--dir", dir)
	vout, err := v.wait()
	if err == nil {
		t.Fatalf("verify passed a damaged spool: %q", vout)
	}
	report := strings.Join(vout, "\n") + v.stderr()
	if !strings.Contains(report, filepath.Base(segs[0])) {
		t.Fatalf("verify does not name the damaged segment:\n%s", report)
	}
	rep := startCLI(t, "spool", "repair", "--dir", dir)
	if _, err := rep.wait(); err != nil {
		t.Fatalf("repair: %v\n%s", err, rep.stderr())
	}
	startCLI(t, "spool", "verify", "--dir", dir).mustSucceed()

	// Bad input gets a clear error.
	bad := startCLI(t, "spool", "append", "--dir", dir, "--codec", "lzma")
	bad.closeStdin()
	if _, err := bad.wait(); err == nil || !strings.Contains(bad.stderr(), "lzma") {
		t.Fatalf("append --codec lzma: %v %q", err, bad.stderr())
	}
}
