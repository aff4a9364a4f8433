// Package testutil holds the test helpers FastMQ's packages share. Tests
// wait on conditions, never on sleeps; where a test only needs timers, it
// uses testing/synctest instead of this package.
package testutil

import (
	"os"
	"testing"
	"time"
)

// DefaultWait is how long WaitFor waits when given no timeout.
const DefaultWait = 10 * time.Second

// WaitFor polls cond until it holds, failing t after timeout (DefaultWait
// when timeout is zero). what names the condition in the failure. The
// polling interval is a millisecond: it is not synchronisation, only how
// often a condition about real sockets, files or gossip is looked at.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	if timeout <= 0 {
		timeout = DefaultWait
	}
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// ShortDir returns a new directory with a short path, removed at cleanup:
// unix socket paths are limited to about 100 bytes, and t.TempDir paths
// can be longer.
func ShortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fmq")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
