package collect_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fastmq/fastmq/patterns/collect"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type publisher struct {
	log *spool.Log
	srv *pull.Server
}

func newPublisher(t *testing.T, lines int) *publisher {
	t.Helper()
	l, err := spool.Open(spool.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	recs := make([]spool.Record, lines)
	for i := range recs {
		recs[i].Value = []byte(fmt.Sprintf("line %d", i))
	}
	if _, err := l.Append(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
	srv, err := pull.NewServer(pull.ServerConfig{Lookup: func(s string) (*spool.Log, bool) { return l, s == "logs" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &publisher{log: l, srv: srv}
}

// run collects until the output of every publisher has want lines.
func run(t *testing.T, cfg collect.Config, want map[string]int) {
	t.Helper()
	c, err := collect.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok := true
		st := c.Stats()
		for pub, n := range want {
			if st.Files[pub] < uint64(n) {
				ok = false
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("collected %v, want %v", st.Files, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("run ended with %v, want context.Canceled", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func checkFile(t *testing.T, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("%s has %d lines, want %d", path, len(lines), n)
	}
	for i, l := range lines {
		if l != fmt.Sprintf("line %d", i) {
			t.Fatalf("%s line %d is %q", path, i, l)
		}
	}
}

func TestCollectsEachPublisherToItsFile(t *testing.T) {
	a, b := newPublisher(t, 500), newPublisher(t, 300)
	out := t.TempDir()
	cfg := collect.Config{Dir: out, Stream: "logs", Publishers: map[string]string{"host-a": a.srv.Endpoints()[0], "host-b": b.srv.Endpoints()[0]}}
	run(t, cfg, map[string]int{"host-a": 500, "host-b": 300})
	checkFile(t, filepath.Join(out, "host-a.log"), 500)
	checkFile(t, filepath.Join(out, "host-b.log"), 300)

	// More lines after a restart: appended after the old ones, none repeated.
	recs := make([]spool.Record, 200)
	for i := range recs {
		recs[i].Value = []byte(fmt.Sprintf("line %d", 500+i))
	}
	if _, err := a.log.Append(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
	run(t, cfg, map[string]int{"host-a": 700, "host-b": 300})
	checkFile(t, filepath.Join(out, "host-a.log"), 700)
	checkFile(t, filepath.Join(out, "host-b.log"), 300)
}

// TestTruncatesOutputAheadOfPosition simulates a crash after lines were
// written but before their position was recorded: the extra lines are cut
// and pulled again, so none is doubled.
func TestTruncatesOutputAheadOfPosition(t *testing.T) {
	p := newPublisher(t, 100)
	out := t.TempDir()
	cfg := collect.Config{Dir: out, Stream: "logs", Publishers: map[string]string{"h": p.srv.Endpoints()[0]}}
	run(t, cfg, map[string]int{"h": 100})
	// Rewind the recorded position to line 60, as if the crash came before
	// the last sync recorded lines 60..99.
	f := filepath.Join(out, "h.log")
	b, _ := os.ReadFile(f)
	size := strings.Index(string(b), "line 60\n")
	if err := os.WriteFile(f+".pos", []byte(fmt.Sprintf(`{"next":60,"size":%d}`, size)), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, cfg, map[string]int{"h": 100})
	checkFile(t, f, 100)
}

func TestRefusesDamagedState(t *testing.T) {
	p := newPublisher(t, 10)
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "h.log"), []byte("line 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// An output file without a position is not overwritten or appended to.
	c, err := collect.New(collect.Config{Dir: out, Stream: "logs", Publishers: map[string]string{"h": p.srv.Endpoints()[0]}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = c.Run(ctx)
	c.Close()
	if err == nil || !strings.Contains(err.Error(), "without a position file") {
		t.Fatalf("run ended with %v, want an error about the file without a position", err)
	}
	b, _ := os.ReadFile(filepath.Join(out, "h.log"))
	if string(b) != "line 0\n" {
		t.Fatalf("existing file changed to %q", b)
	}
}

// TestCrashBeforeFirstSync: a collector killed after its buffer spilled
// into a new file but before the first sync leaves data and a fresh
// position; the next start truncates it and collects from the start.
func TestCrashBeforeFirstSync(t *testing.T) {
	p := newPublisher(t, 20)
	out := t.TempDir()
	f := filepath.Join(out, "h.log")
	if err := os.WriteFile(f, []byte("line 0\nline 1\npartial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f+".pos", []byte(`{"next":0,"size":0,"fresh":true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, collect.Config{Dir: out, Stream: "logs", Publishers: map[string]string{"h": p.srv.Endpoints()[0]}}, map[string]int{"h": 20})
	checkFile(t, f, 20)
}

// TestPublisherNamesMapToDistinctFiles checks that names that a naive
// mapping would merge, or that try to leave the directory, stay apart.
func TestPublisherNamesMapToDistinctFiles(t *testing.T) {
	a, b, c := newPublisher(t, 3), newPublisher(t, 4), newPublisher(t, 5)
	out := t.TempDir()
	pubs := map[string]string{"a/b": a.srv.Endpoints()[0], "a_b": b.srv.Endpoints()[0], "../up": c.srv.Endpoints()[0]}
	run(t, collect.Config{Dir: out, Stream: "logs", Publishers: pubs}, map[string]int{"a/b": 3, "a_b": 4, "../up": 5})
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	logs := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			logs++
		}
	}
	if logs != 3 {
		t.Fatalf("%d log files for 3 publishers: %v", logs, entries)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(out), "up.log")); err == nil {
		t.Fatal("a publisher name escaped the output directory")
	}
}
