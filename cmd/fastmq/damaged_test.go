package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastmq/fastmq/spool"
)

// writeStream writes n one-record batches ("000", "001", ...) to the
// stream name's spool under the data directory data.
func writeStream(t *testing.T, data, name string, n int) string {
	t.Helper()
	dir := filepath.Join(data, "streams", name)
	l, err := spool.Open(spool.Config{Dir: dir, Sync: spool.SyncEach})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := l.Append(context.Background(), spool.Record{Value: []byte(fmt.Sprintf("%03d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCLIDamagedStreamServedReadOnly proves `fastmq publish` started on a
// data directory where its own stream is damaged in the middle keeps
// running: it logs the damage at ERROR, serves the other stream, and
// serves the damaged one up to the damage to a `fastmq consume` process.
func TestCLIDamagedStreamServedReadOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "pub")
	writeStream(t, data, "good", 5)
	bad := writeStream(t, data, "bad", 200)
	segs, _ := filepath.Glob(filepath.Join(bad, "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments of bad: %v", segs)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff // a batch in the middle: valid ones follow
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}

	gossip := freePort(t)
	pub := startCLI(t, "publish", "--name", "pub", "--data", data, "--gossip", gossip, "--stream", "bad")
	for _, c := range []struct {
		stream string
		count  int
	}{{"good", 5}, {"bad", 90}} { // the damage is near record 100
		cons := startCLI(t, "consume", "--data", filepath.Join(dir, "cons-"+c.stream), "--join", gossip,
			"--stream", c.stream, "--name", "reader", "--count", fmt.Sprint(c.count))
		out := cons.mustSucceed()
		for i, v := range out {
			if want := fmt.Sprintf("%03d", i); v != want {
				t.Fatalf("%s record %d: %q, want %q", c.stream, i, v, want)
			}
		}
	}
	if !pub.running() {
		t.Fatalf("publish exited: %v\n%s", pub.err, pub.stderr())
	}
	pub.kill9() // its stderr is then read to the end
	errs := pub.stderr()
	if !strings.Contains(errs, "level=ERROR") || !strings.Contains(errs, "stream=bad") || !strings.Contains(errs, "fastmq spool repair --dir "+bad) {
		t.Fatalf("publish's stderr does not report the damaged stream at ERROR:\n%s", errs)
	}
}
