package rpc_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/cpuclock"
	"github.com/fastmq/fastmq/patterns/rpc"
)

// BenchmarkRPCCall measures Call over TCP on loopback: round-trip latency
// with one caller and one instance, and throughput with 16 callers over 2
// instances, 100-byte requests (the workload). It reports calls/s
// and the p50 and p99 latency, the CPU time per call, the system calls
// per call and how many times a goroutine was scheduled to run per call
// (each a hand-off between goroutines or a wake-up from the network).
func BenchmarkRPCCall(b *testing.B) {
	for _, bc := range []struct {
		callers, instances int
	}{{1, 1}, {16, 2}} {
		b.Run(fmt.Sprintf("callers=%d/instances=%d", bc.callers, bc.instances), func(b *testing.B) {
			mesh := newMesh(b)
			for i := range bc.instances {
				serve(b, mesh, fmt.Sprintf("s%d", i), func(ctx context.Context, req []byte) ([]byte, error) { return req, nil }, nil)
			}
			c := client(b, mesh, bc.instances, nil)
			req := make([]byte, 100)
			ctx := context.Background()
			for range 100 { // connect and warm up
				if _, err := c.Call(ctx, req, rpc.CallOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(req)))
			b.ReportAllocs()
			lat := make([][]time.Duration, bc.callers)
			var next sync.Mutex
			left := b.N
			b.ResetTimer()
			r0, w0 := syscalls()
			g0 := goroutineRuns()
			cpu0 := cpuclock.Process()
			start := time.Now()
			var wg sync.WaitGroup
			for w := range bc.callers {
				wg.Go(func() {
					for {
						next.Lock()
						if left == 0 {
							next.Unlock()
							return
						}
						left--
						next.Unlock()
						t := time.Now()
						if _, err := c.Call(ctx, req, rpc.CallOptions{Timeout: 5 * time.Second}); err != nil {
							b.Error(err)
							return
						}
						lat[w] = append(lat[w], time.Since(t))
					}
				})
			}
			wg.Wait()
			d := time.Since(start)
			cpu := cpuclock.Process() - cpu0
			runs := goroutineRuns() - g0
			b.StopTimer()
			if cpu > 0 {
				// What a call costs in CPU time, client and servers
				// together: a busy machine disturbs it less than calls/s.
				b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/call")
			}
			if r1, w1 := syscalls(); r1 > 0 {
				b.ReportMetric(float64(r1-r0)/float64(b.N), "reads/call")
				b.ReportMetric(float64(w1-w0)/float64(b.N), "writes/call")
			}
			b.ReportMetric(float64(runs)/float64(b.N), "goroutine-runs/call")
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(len(all))/d.Seconds(), "calls/s")
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
			}
		})
	}
}

// goroutineRuns estimates how many times goroutines were scheduled to run
// so far from the count of the runtime's scheduling latency histogram,
// which samples one in 8 of the times a goroutine goes from runnable to
// running (the runtime's gTrackingPeriod).
func goroutineRuns() uint64 {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	var n uint64
	for _, c := range s[0].Value.Float64Histogram().Counts {
		n += c
	}
	return 8 * n
}

// syscalls returns the read and write system calls this process made so
// far (Linux's /proc/self/io), or zeros where that is not available.
func syscalls() (reads, writes uint64) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(": "))
		if !ok {
			continue
		}
		n, _ := strconv.ParseUint(string(v), 10, 64)
		switch string(k) {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
}
