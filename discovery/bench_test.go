package discovery

import (
	"os"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
)

// benchProfile is ProfileLocal, or ProfileLAN (on loopback) when
// FASTMQ_BENCH_PROFILE=lan.
func benchProfile() Profile {
	if os.Getenv("FASTMQ_BENCH_PROFILE") == "lan" {
		return ProfileLAN
	}
	return ProfileLocal
}

// benchCluster starts n ProfileLocal nodes joined to the first; the caller
// closes them.
func benchCluster(b *testing.B, n int) []*Membership {
	b.Helper()
	nodes := make([]*Membership, 0, n)
	for i := range n {
		cfg := Config{NodeName: nodeName(i), Profile: benchProfile(), Logger: testLogger()}
		if cfg.Profile == ProfileLAN {
			cfg.BindAddr = "127.0.0.1:0"
		}
		if i > 0 {
			cfg.Seeds = []string{nodes[0].GossipAddr()}
		}
		m, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, m)
	}
	return nodes
}

func closeAll(nodes []*Membership) {
	for _, m := range nodes {
		m.Close()
	}
}

var benchSizes = []struct {
	name string
	n    int
}{{"nodes=5", 5}, {"nodes=20", 20}}

var benchService = Service{Name: "bench", Kind: "ROUTER", Endpoints: []string{"tcp://127.0.0.1:5555"}}

// BenchmarkConvergence measures, with ProfileLocal timers (see benchProfile), the time from
// starting n nodes (each joining the first) until every node sees n alive
// members. SetBytes is the size of one node's encoded tags.
func BenchmarkConvergence(b *testing.B) {
	skipShort(b)
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(tagsSize(buildTags(nil, nil, nil, ""))))
			for b.Loop() {
				nodes := benchCluster(b, sz.n)
				testutil.WaitFor(b, "convergence", time.Minute, func() bool { return converged(nodes, sz.n) })
				b.StopTimer()
				closeAll(nodes)
				b.StartTimer()
			}
		})
	}
}

// BenchmarkAdvertisePropagation measures the time from Advertise on one node
// until every node's Lookup returns it.
func BenchmarkAdvertisePropagation(b *testing.B) {
	skipShort(b)
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			nodes := benchCluster(b, sz.n)
			defer closeAll(nodes)
			testutil.WaitFor(b, "convergence", time.Minute, func() bool { return converged(nodes, sz.n) })
			b.ReportAllocs()
			b.SetBytes(int64(tagsSize(buildTags(nil, map[string]Service{"bench": benchService}, nil, "127.0.0.1"))))
			port := 10000
			for b.Loop() {
				port++
				svc := benchService
				svc.Endpoints = []string{"tcp://127.0.0.1:" + itoa(port)}
				if err := nodes[sz.n-1].Advertise(svc); err != nil {
					b.Fatal(err)
				}
				testutil.WaitFor(b, "propagation", time.Minute, func() bool {
					for _, m := range nodes {
						got := m.Lookup("bench")
						if len(got) != 1 || got[0].Service.Endpoints[0] != svc.Endpoints[0] {
							return false
						}
					}
					return true
				})
			}
		})
	}
}

// BenchmarkFailureDetection measures the time from a node dying without
// leaving (serf shut down, as in Close) until every other node reports it failed and has removed
// its service.
func BenchmarkFailureDetection(b *testing.B) {
	skipShort(b)
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(tagsSize(buildTags(nil, map[string]Service{"bench": benchService}, nil, "127.0.0.1"))))
			for b.Loop() {
				b.StopTimer()
				nodes := benchCluster(b, sz.n)
				victim := nodes[sz.n-1]
				if err := victim.Advertise(benchService); err != nil {
					b.Fatal(err)
				}
				rest := nodes[:sz.n-1]
				testutil.WaitFor(b, "convergence", time.Minute, func() bool {
					for _, m := range rest {
						if aliveCount(m) != sz.n || len(m.Lookup("bench")) != 1 {
							return false
						}
					}
					return true
				})
				b.StartTimer()
				_ = victim.serf.Shutdown() // die without leaving; Close (untimed) follows
				testutil.WaitFor(b, "failure detected", time.Minute, func() bool {
					for _, m := range rest {
						if statusOfMember(m, victim.Name()) != StatusFailed || len(m.Lookup("bench")) != 0 {
							return false
						}
					}
					return true
				})
				b.StopTimer()
				closeAll(nodes)
				b.StartTimer()
			}
		})
	}
}
