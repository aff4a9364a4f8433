package collect_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fastmq/fastmq/internal/fsutil"
	"github.com/fastmq/fastmq/internal/testutil"
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
	testutil.WaitFor(t, fmt.Sprintf("collected %v", want), 20*time.Second, func() bool {
		st := c.Stats()
		for pub, n := range want {
			if st.Files[pub] < uint64(n) {
				return false
			}
		}
		return true
	})
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

// TestPositionFileFormat checks the .pos format of the package doc: written
// as version 2; version 1 and an old unversioned file still read (the collector resumes
// after it, so no line is doubled); a newer version refused with a clear
// error and the output left alone.
func TestPositionFileFormat(t *testing.T) {
	p := newPublisher(t, 30)
	pubs := map[string]string{"h": p.srv.Endpoints()[0]}

	t.Run("writes version 2", func(t *testing.T) {
		out := t.TempDir()
		run(t, collect.Config{Dir: out, Stream: "logs", Publishers: pubs}, map[string]int{"h": 30})
		b, err := os.ReadFile(filepath.Join(out, "h.log.pos"))
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Version int `json:"version"`
			Data    struct {
				Next  uint64 `json:"next"`
				Size  int64  `json:"size"`
				LogID string `json:"log_id"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &env); err != nil {
			t.Fatalf("position file %q: %v", b, err)
		}
		if env.Version != 2 || env.Data.Next != 30 || env.Data.Size != int64(len(fileBytes(t, filepath.Join(out, "h.log")))) || env.Data.LogID != p.log.ID().String() {
			t.Fatalf("position file %s, want version 2, next 30, the file's size and log %s", b, p.log.ID())
		}
	})
	t.Run("reads version 1", func(t *testing.T) {
		out := t.TempDir()
		f := filepath.Join(out, "h.log")
		var lines []byte
		for i := 0; i < 10; i++ {
			lines = fmt.Appendf(lines, "line %d\n", i)
		}
		if err := os.WriteFile(f, lines, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f+".pos", fmt.Appendf(nil, `{"version":1,"data":{"next":10,"size":%d}}`, len(lines)), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, collect.Config{Dir: out, Stream: "logs", Publishers: pubs}, map[string]int{"h": 30})
		checkFile(t, f, 30)
	})
	t.Run("reads unversioned", func(t *testing.T) {
		out := t.TempDir()
		f := filepath.Join(out, "h.log")
		var lines []byte
		for i := 0; i < 10; i++ {
			lines = fmt.Appendf(lines, "line %d\n", i)
		}
		if err := os.WriteFile(f, lines, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f+".pos", fmt.Appendf(nil, `{"next":10,"size":%d}`, len(lines)), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, collect.Config{Dir: out, Stream: "logs", Publishers: pubs}, map[string]int{"h": 30})
		checkFile(t, f, 30)
	})
	t.Run("refuses newer version", func(t *testing.T) {
		out := t.TempDir()
		f := filepath.Join(out, "h.log")
		if err := os.WriteFile(f, []byte("line 0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f+".pos", []byte(`{"version":3,"data":{"next":1,"size":7}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := collect.New(collect.Config{Dir: out, Stream: "logs", Publishers: pubs})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err = c.Run(ctx)
		c.Close()
		if !errors.Is(err, fsutil.ErrUnknownVersion) || !strings.Contains(err.Error(), "newer collector") {
			t.Fatalf("run ended with %v, want an error about a position file from a newer collector", err)
		}
		if b := fileBytes(t, f); string(b) != "line 0\n" {
			t.Fatalf("output changed to %q", b)
		}
	})
}

func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
