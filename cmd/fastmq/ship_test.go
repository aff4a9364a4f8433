package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/testutil"
)

// TestShipSkipsLinesAppendedBeforeACrash covers the window between a
// batch being durable in the spool and the tailer's positions being
// committed: with the committed positions lost (the positions file is gone,
// as after a crash right before its first commit), a restarted shipper reads
// the file from the start again and must not append its lines twice.
func TestShipSkipsLinesAppendedBeforeACrash(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "app.log")
	var lines []byte
	for i := 0; i < 50; i++ {
		lines = fmt.Appendf(lines, "line %d\n", i)
	}
	if err := os.WriteFile(logPath, lines, 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "node")
	// run ships until the stream holds want records, then stops the shipper.
	run := func(want uint64) uint64 {
		t.Helper()
		n, err := fastmq.New(fastmq.Config{Name: "shipper", DataDir: data})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		l, err := n.Stream("logs")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- shipFiles(ctx, n, "logs", []string{logPath}, false) }()
		testutil.WaitFor(t, fmt.Sprintf("%d records", want), 20*time.Second, func() bool { return l.NextOffset() >= want })
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("ship: %v", err)
		}
		return l.NextOffset()
	}
	if got := run(50); got != 50 {
		t.Fatalf("first run shipped %d lines, want 50", got)
	}
	// The crash: the committed read positions are lost.
	if err := os.Remove(filepath.Join(data, "ship-logs.positions")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "line 50\n")
	f.Close()
	if got := run(51); got != 51 {
		t.Fatalf("after a restart without positions the stream holds %d records, want 51 (no line twice)", got)
	}
}
