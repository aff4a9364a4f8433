package main

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
)

// TestCLIPublishDedup: publish --dedup stores a line sent again once, in
// the same run, after a clean stop and after a SIGKILL; --id-header takes
// the id from the line's first field and stores it as the named header.
func TestCLIPublishDedup(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) *cliProc {
		return startCLI(t, append([]string{"publish", "--name", "p", "--data", dir, "--ack"}, args...)...)
	}
	expect := func(p *cliProc, want ...string) {
		t.Helper()
		for _, w := range want {
			if got := p.line(); got != w {
				t.Fatalf("ack: got %q, want %q\n%s", got, w, p.stderr())
			}
		}
	}
	p := run("--stream", "s", "--dedup")
	p.feed("alpha", "beta", "alpha")
	expect(p, "0", "1", "0 duplicate")
	p.cmd.Process.Signal(os.Interrupt)
	if _, err := p.wait(); err != nil {
		t.Fatalf("publish: %v\n%s", err, p.stderr())
	}
	// A retry of the same input after a clean stop.
	p = run("--stream", "s", "--dedup")
	p.feed("beta", "gamma")
	expect(p, "1 duplicate", "2")
	p.kill9()
	// And after a SIGKILL.
	p = run("--stream", "s", "--dedup")
	p.feed("alpha", "beta", "gamma", "delta")
	expect(p, "0 duplicate", "1 duplicate", "2 duplicate", "3")
	p.cmd.Process.Signal(os.Interrupt)
	p.wait()

	// --dedup-window negative: ids are not looked at, the repeat is stored.
	p = run("--stream", "nodedup", "--dedup", "--dedup-window", "-1s")
	p.feed("alpha", "alpha")
	expect(p, "0", "1")
	p.cmd.Process.Signal(os.Interrupt)
	p.wait()

	p = run("--stream", "ids", "--id-header", "order-id")
	p.feed("o-1\tfirst", "o-2\tsecond", "o-1\tfirst again")
	expect(p, "0", "1", "0 duplicate")
	p.cmd.Process.Signal(os.Interrupt)
	p.wait()
	read := startCLI(t, "spool", "read", "--dir", filepath.Join(dir, "streams", "ids"), "--json")
	out := read.mustSucceed()
	if len(out) != 2 || !strings.Contains(out[0], `{"key":"order-id","value":"o-1"}`) || !strings.Contains(out[0], `"value":"first"`) ||
		!strings.Contains(out[1], `{"key":"fastmq-msg-id","value":"o-2"}`) {
		t.Fatalf("stored records: %q", out)
	}

	// A line without an id, and the two options together, are refused.
	p = run("--stream", "ids", "--id-header", "order-id")
	p.feed("no tab here")
	p.closeStdin()
	p.mustFail("line 1: with --id-header each line is ID<TAB>VALUE")
	p = run("--stream", "ids", "--id-header", "x", "--dedup")
	p.closeStdin()
	p.mustFail("exclude each other")
}

// TestCLIPublishKeyedDelayed: publish --keyed takes each line's key from
// its first field, --delay gives each record a not-before time, and an
// --ordered group of consume delivers them once due, one key's in order.
func TestCLIPublishKeyedDelayed(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	gossip := freePort(t)
	p := startCLI(t, "publish", "--name", "p", "--data", filepath.Join(dir, "p"), "--gossip", gossip, "--stream", "s",
		"--keyed", "--delay", "1500ms", "--ack")
	fed := time.Now() // each record is due 1.5 s after its line was read, after this
	p.feed("k1\tfirst", "k2\tother", "k1\tsecond")
	for _, want := range []string{"0", "1", "2"} {
		if got := p.line(); got != want {
			t.Fatalf("ack %q, want %q\n%s", got, want, p.stderr())
		}
	}
	got := filepath.Join(dir, "got")
	startCLI(t, "consume", "--stream", "s", "--group", "o", "--ordered", "--count", "3", "--concurrency", "2",
		"--exec", `echo "$(cat) $(date +%s%N)" >> `+got, "--data", filepath.Join(dir, "c"), "--join", gossip).mustSucceed()
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 || strings.Index(string(b), "first") > strings.Index(string(b), "second") {
		t.Fatalf("handled %q, want 3 records, k1's first before its second", lines)
	}
	for _, l := range lines {
		f := strings.Fields(l)
		ns, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
		if at := time.Unix(0, ns); at.Before(fed.Add(1500 * time.Millisecond)) {
			t.Fatalf("%q handled %v after its line was fed, before its 1.5 s delay", l, at.Sub(fed))
		}
	}
	p.cmd.Process.Signal(os.Interrupt)
	p.wait()

	// A line without its key field is refused, naming it.
	q := startCLI(t, "publish", "--name", "q", "--data", filepath.Join(dir, "q"), "--stream", "s", "--keyed")
	q.feed("no key here")
	q.mustFail("line 1: with --keyed each line is KEY<TAB>VALUE")
}

// TestCLIPublishFullDisk: on a full disk publish refuses records and keeps
// running (before: it exited on the first write that met ENOSPC, and with
// two publishers on one small disk both exited, the disk guard's default
// 5 % never refusing first); with --ack each refused record prints
// "refused: REASON" in its place, stderr says what was refused, and
// records are taken again once space returns.
func TestCLIPublishFullDisk(t *testing.T) {
	disk := testutil.SmallDisk(t, "16m")
	var ps []*cliProc
	for _, name := range []string{"p1", "p2"} {
		p := startCLI(t, "publish", "--name", name, "--data", filepath.Join(disk, name), "--ack", "--stream", "s")
		p.feed("first")
		if got := p.line(); got != "0" {
			t.Fatalf("%s ack: got %q, want 0\n%s", name, got, p.stderr())
		}
		ps = append(ps, p)
	}
	filler := testutil.FillDisk(t, disk)
	lines := make([]string, 64) // 4 MiB: more than is reserved ahead of the writer
	for i := range lines {
		b := make([]byte, 48<<10)
		rand.Read(b)
		lines[i] = base64.StdEncoding.EncodeToString(b) // 64 KiB the codec cannot shrink
	}
	for _, p := range ps {
		p.feed(lines...)
		refused := 0
		for range lines {
			got := p.line()
			switch {
			case strings.HasPrefix(got, "refused: ") && strings.Contains(got, "no space left on device"):
				refused++
			case strings.Trim(got, "0123456789") == "":
			default:
				t.Fatalf("ack line %q: want an offset or \"refused: REASON\"\n%s", got, p.stderr())
			}
		}
		if refused == 0 {
			t.Fatalf("64 records of 64 KiB taken on a full disk\n%s", p.stderr())
		}
		if !p.running() {
			t.Fatalf("publish exited on a full disk\n%s", p.stderr())
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		p.feed("after")
		if got := p.line(); strings.Trim(got, "0123456789") != "" || got == "" {
			t.Fatalf("ack once space returned: %q\n%s", got, p.stderr())
		}
		if !strings.Contains(p.stderr(), "refused") {
			t.Fatalf("stderr does not say what was refused:\n%s", p.stderr())
		}
		p.cmd.Process.Signal(os.Interrupt)
		if _, err := p.wait(); err != nil {
			t.Fatalf("publish: %v\n%s", err, p.stderr())
		}
	}
}
