package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/console"
	"github.com/fastmq/fastmq/internal/testutil"
)

// httpNode starts a node whose StatusHandler is served on a real HTTP server on
// loopback, advertised in gossip.
func httpNode(tb testing.TB, name string, seeds ...string) *fastmq.Node {
	tb.Helper()
	return httpNodeWith(tb, name, nil, seeds...)
}

// httpNodeWith is httpNode with the handler wrapped by wrap (unless nil).
func httpNodeWith(tb testing.TB, name string, wrap func(http.Handler) http.Handler, seeds ...string) *fastmq.Node {
	tb.Helper()
	n, err := fastmq.New(fastmq.Config{Name: name, DataDir: filepath.Join(tb.TempDir(), name), Seeds: seeds})
	if err != nil {
		tb.Fatalf("start node %s: %v", name, err)
	}
	h := n.StatusHandler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	if err := n.AdvertiseHTTP(srv.Listener.Addr().String()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		srv.Close()
		n.Close()
	})
	return n
}

func waitHTTPMembers(tb testing.TB, n *fastmq.Node, want int) {
	tb.Helper()
	testutil.WaitFor(tb, fmt.Sprintf("%s to see %d http addresses", n.Name(), want), 30*time.Second, func() bool {
		count := 0
		for _, m := range n.Status().Members {
			if m.HTTP != "" && m.Status == "alive" {
				count++
			}
		}
		return count == want
	})
}

// TestMeshGatherOneDown: GatherMesh has every member's own status; a
// member whose HTTP server hangs is marked down once ctx ends, and the
// others are still there.
func TestMeshGatherOneDown(t *testing.T) {
	var hung atomic.Bool
	hang := make(chan struct{})
	defer close(hang)
	n1 := httpNode(t, "g1")
	n2 := httpNode(t, "g2", n1.GossipAddr())
	httpNodeWith(t, "g3", func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !hung.Load() {
				h.ServeHTTP(w, r)
				return
			}
			select { // accept, and never answer
			case <-hang:
			case <-r.Context().Done():
			}
		})
	}, n1.GossipAddr())
	waitHTTPMembers(t, n1, 3)
	publishN(t, n2, "events", 0, 7)
	ms := console.GatherMesh(context.Background(), n1, nil)
	if ms.Node != "g1" || len(ms.Members) != 3 {
		t.Fatalf("gathered %+v", ms)
	}
	for _, m := range ms.Members {
		if m.Down || m.State == nil || m.State.Name != m.Name {
			t.Fatalf("member %s: %+v", m.Name, m)
		}
	}
	if st := ms.Members[1].State; len(st.Streams) != 1 || st.Streams[0].Next != 7 || st.Disk.SpoolBytes <= 0 {
		t.Errorf("g2's status: %+v", st)
	}

	hung.Store(true) // g3 hangs
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	ms = console.GatherMesh(ctx, n1, nil)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("gathering took %v despite the timeout", took)
	}
	g3 := ms.Members[2]
	if g3.Name != "g3" || !g3.Down || g3.State != nil || g3.Error == "" {
		t.Errorf("hung g3: %+v", g3)
	}
	if ms.Members[0].State == nil || ms.Members[1].State == nil {
		t.Errorf("the others lost: %+v", ms.Members)
	}
}

// BenchmarkMeshGather measures one gathering of a mesh of 20 members
// serving 50 streams each, over real HTTP on loopback. It reports the
// members whose status was had (up) per gathering: on a loaded machine
// gossip may declare one failed.
func BenchmarkMeshGather(b *testing.B) {
	const members, streams = 20, 50
	var nodes []*fastmq.Node
	for i := 0; i < members; i++ {
		// The streams exist before the node starts, so it advertises them
		// all before it joins, not one gossip update a stream.
		name := fmt.Sprintf("b%02d", i)
		dir := filepath.Join(b.TempDir(), name)
		for s := 0; s < streams; s++ {
			if err := os.MkdirAll(filepath.Join(dir, "streams", fmt.Sprintf("s%02d", s)), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		n, err := fastmq.New(fastmq.Config{Name: name, DataDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(n.StatusHandler())
		b.Cleanup(func() {
			srv.Close()
			n.Close()
		})
		if err := n.AdvertiseHTTP(srv.Listener.Addr().String()); err != nil {
			b.Fatal(err)
		}
		if i > 0 {
			if _, err := n.Membership().Join(context.Background(), nodes[0].GossipAddr()); err != nil {
				b.Fatal(err)
			}
		}
		nodes = append(nodes, n)
	}
	seed := nodes[0]
	waitHTTPMembers(b, seed, members)
	b.ResetTimer()
	up := 0
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ms := console.GatherMesh(ctx, seed, nil)
		cancel()
		for _, m := range ms.Members {
			if m.State != nil && len(m.State.Streams) == streams {
				up++
			}
		}
	}
	b.ReportMetric(float64(up)/float64(b.N), "up/op")
}
