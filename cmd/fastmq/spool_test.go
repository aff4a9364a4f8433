package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastmq/fastmq/spool"
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

// spoolBatches returns the byte position of each batch in a segment file
// (the header is 32 bytes; each batch starts with its uint32 length).
func spoolBatches(t *testing.T, data []byte) []int {
	t.Helper()
	var out []int
	for pos := 32; pos+48 <= len(data); {
		n := int(binary.LittleEndian.Uint32(data[pos:]))
		if n == 0 {
			break
		}
		out = append(out, pos)
		pos += n
	}
	return out
}

// buildSpool writes n records "record <i>" into dir in segments of
// segBytes, through the library.
func buildSpool(t *testing.T, dir string, n int, segBytes int64) {
	t.Helper()
	l, err := spool.Open(spool.Config{Dir: dir, Sync: spool.SyncNone, SegmentBytes: segBytes})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := l.Append(context.Background(), spool.Record{Value: fmt.Appendf(nil, "record %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// mustFail runs the command, which must exit non-zero and say want (on
// stdout or stderr); it returns the stdout lines.
func (p *cliProc) mustFail(want string) []string {
	p.t.Helper()
	lines, err := p.wait()
	all := strings.Join(lines, "\n") + "\n" + p.stderr()
	if err == nil {
		p.t.Fatalf("%v succeeded: %s", p.cmd.Args[1:], all)
	}
	if !strings.Contains(all, want) {
		p.t.Fatalf("%v does not say %q: %s", p.cmd.Args[1:], want, all)
	}
	return lines
}

// TestCLISpoolDamage: damage is never a clean end in the spool tools. With a
// flipped byte in the last segment and valid batches after it, read prints
// the records before the damage and fails naming it, read --follow fails
// instead of waiting, stats says where the log is damaged; a directory that
// is no spool is refused by verify, stats, read and repair; read --from past
// the end fails; a deleted middle segment is repaired, after which verify is
// clean and the writer opens the stream. (Before: each of these exited 0 or
// waited for ever.)
func TestCLISpoolDamage(t *testing.T) {
	t.Run("flipped byte in the last segment", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		buildSpool(t, dir, 20, 0)
		seg := filepath.Join(dir, fmt.Sprintf("%020d.seg", 0))
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		bs := spoolBatches(t, b)
		if len(bs) != 20 {
			t.Fatalf("%d batches", len(bs))
		}
		b[bs[12]+50] ^= 0xff // the payload of the batch of record 12
		if err := os.WriteFile(seg, b, 0o644); err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := 0; i < 12; i++ {
			want = append(want, fmt.Sprintf("record %d", i))
		}
		out := startCLI(t, "spool", "read", "--dir", dir).mustFail("offset 12")
		wantOut(t, "read of a damaged spool", out, want...)
		startCLI(t, "spool", "read", "--dir", dir, "--from", "5", "--follow").mustFail("corrupt")
		startCLI(t, "spool", "read", "--dir", dir, "--from", "15").mustFail("corrupt")
		stats := startCLI(t, "spool", "stats", "--dir", dir).mustFail("damaged at offset 12")
		if !strings.Contains(strings.Join(stats, "\n"), "damaged at:    offset 12") {
			t.Fatalf("stats: %q", stats)
		}
	})
	t.Run("no spool", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		for _, args := range [][]string{{"verify"}, {"stats"}, {"read"}, {"repair"}} {
			startCLI(t, append([]string{"spool"}, append(args, "--dir", dir)...)...).mustFail("not a spool directory")
		}
	})
	t.Run("read past the end", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		buildSpool(t, dir, 5, 0)
		startCLI(t, "spool", "read", "--dir", dir, "--from", "9").mustFail("past the end of the log: the next offset is 5")
		wantOut(t, "read --from 5", startCLI(t, "spool", "read", "--dir", dir, "--from", "5").mustSucceed())
	})
	t.Run("middle segment deleted", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		buildSpool(t, dir, 100, 1<<10)
		segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
		if len(segs) < 3 {
			t.Fatalf("segments: %v", segs)
		}
		if err := os.Remove(segs[1]); err != nil {
			t.Fatal(err)
		}
		startCLI(t, "spool", "verify", "--dir", dir).mustFail("damaged")
		rep := startCLI(t, "spool", "repair", "--dir", dir).mustSucceed()
		if r := strings.Join(rep, "\n"); strings.Contains(r, "nothing to repair") || !strings.Contains(r, "removed offsets") {
			t.Fatalf("repair: %s", r)
		}
		startCLI(t, "spool", "verify", "--dir", dir).mustSucceed()
		app := startCLI(t, "spool", "append", "--dir", dir, "--ack")
		app.feed("after repair")
		if got := app.line(); got != "100" {
			t.Fatalf("append after repair acked %q", got)
		}
		app.closeStdin()
		app.mustSucceed()
	})
}

// TestCLISpoolZeroedTail checks that acknowledged records zero-filled at the
// end of the log are reported by verify and repair (which starts a new
// epoch), instead of "clean" and "nothing to repair", and that stats shows
// the log's identity and epoch.
func TestCLISpoolZeroedTail(t *testing.T) {
	dir := t.TempDir()
	buildSpool(t, dir, 50, 1<<20)
	stats := strings.Join(startCLI(t, "spool", "stats", "--dir", dir).mustSucceed(), "\n")
	if !strings.Contains(stats, "log id:") || !strings.Contains(stats, "epoch:         0 (from offset 0)") {
		t.Fatalf("stats lacks the identity or epoch:\n%s", stats)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	batches := spoolBatches(t, b)
	cut := batches[len(batches)-10] // the last ten batches (records) become zeros
	for i := cut; i < len(b); i++ {
		b[i] = 0
	}
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	startCLI(t, "spool", "verify", "--dir", dir).mustFail("")
	out := strings.Join(startCLI(t, "spool", "repair", "--dir", dir).mustSucceed(), "\n")
	for _, want := range []string{"acknowledged offsets 40..49 are missing", "new epoch 1 from offset 40"} {
		if !strings.Contains(out, want) {
			t.Fatalf("repair output lacks %q:\n%s", want, out)
		}
	}
	startCLI(t, "spool", "verify", "--dir", dir).mustSucceed()
}
