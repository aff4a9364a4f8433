//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A command stopped by its ctx gets SIGTERM with everything it started,
// and what it started has the grace to finish before SIGKILL: here a
// child that traps SIGTERM and needs 300 ms to write its marker.
func TestShellCommandStopGivesGrace(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "done")
	ctx, cancel := context.WithCancel(context.Background())
	c := shellCommand(ctx, `(trap 'sleep 0.3; touch `+marker+`; exit 0' TERM; while :; do sleep 0.05; done) & wait`, 5*time.Second)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the child sets its trap
	cancel()
	c.Wait()
	reap(ctx, c, 5*time.Second)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the child was killed before its grace ran out: %v", err)
	}
}
