package discovery

import (
	"context"
	"testing"

	"github.com/fastmq/fastmq/internal/testutil"
)

// TestRestartRejoins restarts a node under the same name, after a crash and
// after a graceful leave, on the same address and on a new one.
func TestRestartRejoins(t *testing.T) {
	skipShort(t)
	for _, tc := range []struct {
		name     string
		graceful bool
		samePort bool
		fast     bool // restart before the cluster noticed the crash
	}{
		{"crash-same-port", false, true, false},
		{"crash-new-port", false, false, false},
		{"leave-same-port", true, true, false},
		{"leave-new-port", true, false, false},
		{"crash-same-port-fast", false, true, true},
		{"crash-new-port-fast", false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := cluster(t, 3, nil)
			testutil.WaitFor(t, "converge", waitLong, func() bool { return converged(nodes, 3) })
			a, r := nodes[0], nodes[2]
			svc := Service{Name: "svc", Kind: "REP", Endpoints: []string{"tcp://127.0.0.1:4000"}}
			if err := r.Advertise(svc); err != nil {
				t.Fatal(err)
			}
			testutil.WaitFor(t, "service seen", waitLong, func() bool { return len(a.Lookup("svc")) == 1 })
			ch, err := a.Watch(t.Context(), "svc")
			if err != nil {
				t.Fatal(err)
			}
			nextEvent(t, ch, waitLong) // Added

			oldAddr := r.GossipAddr()
			want := StatusFailed
			if tc.graceful {
				want = StatusLeft
				ctx, cancel := context.WithTimeout(context.Background(), waitLong)
				err := r.Leave(ctx)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
			} else {
				r.Close()
			}
			if !tc.fast {
				testutil.WaitFor(t, "old incarnation "+want.String(), waitLong, func() bool { return statusOfMember(a, r.Name()) == want })
				ev := nextEvent(t, ch, waitLong)
				if ev.Type != Removed {
					t.Fatalf("got %+v, want Removed", ev)
				}
			}

			r2 := newNode(t, r.Name(), func(c *Config) {
				if tc.samePort {
					c.BindAddr = oldAddr
				}
				c.Seeds = []string{nodes[1].GossipAddr()}
			})
			if err := r2.Advertise(Service{Name: "svc", Kind: "REP", Endpoints: []string{"tcp://127.0.0.1:4001"}}); err != nil {
				t.Fatal(err)
			}
			testutil.WaitFor(t, "restarted node alive everywhere", waitLong, func() bool {
				return statusOfMember(a, r.Name()) == StatusAlive && statusOfMember(nodes[1], r.Name()) == StatusAlive && aliveCount(r2) == 3
			})
			ev := waitEvent(t, ch, waitLong, func(e Event) bool {
				return e.Instance.Node == r.Name() && e.Type != Removed
			})
			if ev.Type != Added && !tc.fast || ev.Instance.Service.Endpoints[0] != "tcp://127.0.0.1:4001" || ev.Instance.Addr != r2.GossipAddr() {
				t.Fatalf("got %+v, want Added :4001 at %s", ev, r2.GossipAddr())
			}
		})
	}
}
