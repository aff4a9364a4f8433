package rpc_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/rpc"
)

// An instance measured slow once (a warm-up, a pause) is measured again
// and gets its share back: sequential calls with nothing outstanding
// reach every healthy instance, instead of only the ones whose first
// replies were fast.
func TestCallsReachAnOnceSlowInstance(t *testing.T) {
	mesh := newMesh(t)
	var slow atomic.Bool
	var slowServed atomic.Int64
	slow.Store(true)
	serve(t, mesh, "s1", echo("s1"), nil)
	serve(t, mesh, "s2", func(ctx context.Context, req []byte) ([]byte, error) {
		if slow.Load() {
			time.Sleep(20 * time.Millisecond)
			slowServed.Add(1)
		}
		return append([]byte("s2:"), req...), nil
	}, nil)
	serve(t, mesh, "s3", echo("s3"), nil)
	c := client(t, mesh, 3, func(cfg *rpc.ClientConfig) { cfg.LatencyDecay = 5 * time.Millisecond })
	waitConnected(t, c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := func() string {
		b, err := c.Call(ctx, []byte("x"), rpc.CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		name, _, _ := strings.Cut(string(b), ":")
		return name
	}
	// Until s2 has answered slowly (perhaps a warm-up call did), and the
	// others fast.
	seen := map[string]int{}
	for end := time.Now().Add(5 * time.Second); slowServed.Load() == 0 || seen["s1"] == 0 || seen["s3"] == 0; {
		if time.Now().After(end) {
			t.Fatalf("no call reached s2 while it was slow: %v", seen)
		}
		seen[call()]++
	}
	slow.Store(false)
	got := map[string]int{}
	total := 0
	// A hundred half-lives of the estimate: s2's stale 20 ms fades within
	// the first tenth.
	for end := time.Now().Add(500 * time.Millisecond); total < 200000 && time.Now().Before(end); total++ {
		got[call()]++
	}
	for _, s := range []string{"s1", "s2", "s3"} {
		if got[s]*10 < total {
			t.Fatalf("of %d sequential calls, %s got %d (under a tenth): %v", total, s, got[s], got)
		}
	}
	t.Logf("shares of %d calls: %v", total, got)
}
