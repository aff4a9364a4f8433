package discovery

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
)

// TestForget: a failed member is removed from every member's list by
// Forget on one of them, at once rather than at reap time; an alive
// member and an unknown one are refused.
func TestForget(t *testing.T) {
	skipShort(t)
	nodes := cluster(t, 3, nil)
	testutil.WaitFor(t, "3 nodes converge", waitLong, func() bool { return converged(nodes, 3) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := nodes[0].Forget(ctx, nodes[1].Name()); !errors.Is(err, ErrAlive) {
		t.Fatalf("forget an alive member: %v, want ErrAlive", err)
	}
	if err := nodes[0].Forget(ctx, "nobody"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("forget an unknown member: %v, want ErrInvalid", err)
	}
	gone := nodes[2].Name()
	nodes[2].Close() // no leave: it fails
	status := func(m *Membership) (Status, bool) { return statusIn(m.Members(), gone) }
	testutil.WaitFor(t, "the member seen failed", waitLong, func() bool {
		s0, _ := status(nodes[0])
		s1, _ := status(nodes[1])
		return s0 == StatusFailed && s1 == StatusFailed
	})
	if err := nodes[0].Forget(ctx, gone); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the member gone from both lists", waitLong, func() bool {
		_, k0 := status(nodes[0])
		_, k1 := status(nodes[1])
		return !k0 && !k1
	})
}
