package group_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
)

// A member fetches again once half its buffer was taken, while the other
// half still waits to be handed out: its two fetch loops do not split
// the slots coming back between them (each would have half a buffer's
// worth only once the buffer ran dry, and the member would wait a round
// trip with nothing to hand out).
func TestMemberFetchesEachHalfBuffer(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 1000)
	const buffer = 64
	m := member(t, group.MemberConfig{Name: "a", Buffer: buffer}, p)
	delivered := func() uint64 {
		c, _ := p.groups.Counters("s", "g")
		return c.Delivered
	}
	testutil.WaitFor(t, "a full buffer leased", 0, func() bool { return delivered() == buffer })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for round := 1; round <= 4; round++ {
		for range buffer / 2 {
			if _, err := m.Next(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// Half the buffer still waits; the half taken is fetched again.
		want := uint64(buffer + round*buffer/2)
		testutil.WaitFor(t, fmt.Sprintf("round %d: a fetch for the half buffer taken (%d leased)", round, want), 0, func() bool { return delivered() == want })
	}
}
