package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/console"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
)

// TestConsoleGroups: the gathered view carries every publisher's consumer
// groups (a member on another node acknowledged on the publisher), with
// their delivery and acknowledgement rates.
func TestConsoleGroups(t *testing.T) {
	as := startMesh(t, "gp", "gm")
	publishN(t, as[0].node, "s", 0, 20)
	m, err := as[1].node.Group(fastmq.GroupConfig{Stream: "s", Group: "w", Member: group.MemberConfig{Buffer: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	take := func(n int) {
		for i := 0; i < n; i++ {
			msg, err := m.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := msg.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	take(5)
	first := as[1].con.Mesh(ctx)
	take(5)
	var v console.View
	var g group.GroupStats
	testutil.WaitFor(t, "a later gathering with 10 acknowledged", 0, func() bool {
		v = as[1].con.Mesh(ctx)
		mm, ok := member(v, "gp")
		if !ok || mm.State == nil || len(mm.State.Groups) != 1 {
			return false
		}
		g = mm.State.Groups[0]
		return v.Mesh.Time.After(first.Mesh.Time) && g.Acked == 10
	})
	if g.Stream != "s" || g.Group != "w" || g.Lag != 10 || g.High != 20 {
		t.Fatalf("group in the view: %+v", g)
	}
	if r := v.GroupAckRate["gp/s/w"]; r <= 0 {
		t.Errorf("group ack rate %v, want > 0 (%v)", r, v.GroupAckRate)
	}
	if r := v.GroupDeliverRate["gp/s/w"]; r <= 0 {
		t.Errorf("group delivery rate %v, want > 0 (%v)", r, v.GroupDeliverRate)
	}
}
