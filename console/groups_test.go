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

// TestConsoleGroupActiveMembers: three live members of a group, idle
// after acknowledging everything, hold no lease (Members 0) but wait in
// a fetch: Active counts them and ActiveNodes names their nodes.
func TestConsoleGroupActiveMembers(t *testing.T) {
	as := startMesh(t, "ap", "am1", "am2")
	publishN(t, as[0].node, "s", 0, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ms []*group.Member
	for _, a := range []*agent{as[1], as[1], as[2]} {
		m, err := a.node.Group(fastmq.GroupConfig{Stream: "s", Group: "w", Member: group.MemberConfig{Buffer: 1}})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ms = append(ms, m)
	}
	acked := make(chan error, 6)
	for _, m := range ms {
		go func() {
			for {
				msg, err := m.Next(ctx)
				if err != nil {
					return
				}
				acked <- msg.Ack(ctx)
			}
		}()
	}
	for i := 0; i < 6; i++ {
		if err := <-acked; err != nil {
			t.Fatal(err)
		}
	}
	var g group.GroupStats
	testutil.WaitFor(t, "three active members", 0, func() bool {
		v := as[0].con.Mesh(ctx)
		mm, ok := member(v, "ap")
		if !ok || mm.State == nil || len(mm.State.Groups) != 1 {
			return false
		}
		g = mm.State.Groups[0]
		return g.Active == 3 && g.Members == 0
	})
	if len(g.ActiveNodes) != 2 || g.ActiveNodes[0] != "am1" || g.ActiveNodes[1] != "am2" {
		t.Errorf("active nodes %v, want [am1 am2]", g.ActiveNodes)
	}
	cancel()
}
