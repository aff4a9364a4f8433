// Command rpccmp measures FastMQ's patterns/rpc against NATS request/reply
// (an embedded nats-server v2, responders in a queue group) and grpc-go
// unary calls, on the same machine in the same run, with the same
// workload: C concurrent callers, 2 server instances, S-byte requests
// echoed back, all on one host. FastMQ runs twice: as it comes ("fastmq":
// a client reaches an instance on its own host over the instance's unix
// socket, see rpc.ServerConfig.NoLocalIPC) and over loopback TCP alone
// ("fastmq-tcp", with NoLocalIPC), the transport NATS and gRPC use. Each
// round runs every implementation
// once, in an order that alternates between rounds; it prints each run's
// calls/s, p50 and p99, then per peer the ratios FastMQ/peer for calls/s
// and peer/FastMQ for p50 and p99 (so above 1 means FastMQ is better):
// the median over the rounds, with min and max. It also prints the
// process CPU time each call cost (every implementation runs in this one
// process, one at a time), a figure a busy machine disturbs less than
// calls/s, and the system calls that move data (reads and writes of every
// kind, from /proc/self/io) each call cost, and the shares of the
// machine's CPU time the hypervisor stole and I/O waits took during the
// run (what makes a round noisy on a virtual machine).
//
// The statistics, the noise readings and the alternating rounds are
// internal/benchkit's, shared with every FastMQ benchmark.
//
// It is in the benchcmp module so that NATS and gRPC stay out of FastMQ's
// go.mod: cd benchcmp/rpc && GOFLAGS=-mod=mod go run .
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/fastmq/fastmq/discovery/discoverytest"
	"github.com/fastmq/fastmq/internal/benchkit"
	"github.com/fastmq/fastmq/internal/cpuclock"
	"github.com/fastmq/fastmq/patterns/rpc"
)

var (
	rounds    = flag.Int("rounds", 5, "rounds; each runs every implementation once")
	calls     = flag.Int("n", 20000, "calls per run")
	callers   = flag.Int("callers", 16, "concurrent callers")
	instances = flag.Int("instances", 2, "server instances")
	size      = flag.Int("size", 100, "request size in bytes")
	only      = flag.String("only", "", "run only this implementation (fastmq, nats or grpc), for a profile")
	cpuprof   = flag.String("cpuprofile", "", "write a CPU profile of the measured runs to this file")
)

// impl is one implementation under test: call is safe for concurrent use.
type impl struct {
	name  string
	call  func(ctx context.Context, req []byte) error
	close func()
}

type result struct {
	rate     float64
	p50, p99 time.Duration
	cpu      time.Duration // process CPU time (user and system) per call
	sys      float64       // read and write system calls per call (Linux; 0 elsewhere)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "rpccmp:", err)
		os.Exit(1)
	}
}

func main() {
	flag.Parse()
	setups := map[string]func() impl{
		"fastmq":     func() impl { return setupFastMQ("fastmq", false) },
		"fastmq-tcp": func() impl { return setupFastMQ("fastmq-tcp", true) },
		"nats":       setupNATS,
		"grpc":       setupGRPC,
	}
	var impls []impl
	for _, name := range []string{"fastmq", "fastmq-tcp", "nats", "grpc"} {
		if *only == "" || *only == name {
			impls = append(impls, setups[name]())
		}
	}
	if len(impls) == 0 {
		must(fmt.Errorf("-only %q: no such implementation", *only))
	}
	defer func() {
		for _, im := range impls {
			im.close()
		}
	}()
	req := make([]byte, *size)
	for _, im := range impls { // warm up: connections, buffers
		run(im, req, 2000)
	}
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		must(err)
		must(pprof.StartCPUProfile(f))
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	res := map[string][]result{}
	for r := range *rounds {
		for _, im := range benchkit.Alternate(impls, r) {
			c0 := benchkit.ReadCPU()
			x := run(im, req, *calls)
			noise := benchkit.ReadCPU().Noise(c0)
			res[im.name] = append(res[im.name], x)
			fmt.Printf("round %d %-10s %10.0f calls/s  p50 %7.1fµs  p99 %8.1fµs  cpu %5.1fµs/call  %4.2f syscalls/call%s\n", r+1, im.name, x.rate, us(x.p50), us(x.p99), us(x.cpu), x.sys, noise)
		}
	}
	fmt.Printf("\n%d callers, %d instances, %d-byte requests, %d calls per run, %d rounds\n", *callers, *instances, *size, *calls, *rounds)
	if *only != "" {
		return
	}
	for _, mine := range impls[:2] {
		for _, peer := range impls[2:] {
			compare(mine.name, res[mine.name], peer.name, res[peer.name])
		}
	}
}

// compare prints the ratios of one FastMQ variant's results f to a peer's
// p, round by round.
func compare(mine string, f []result, peer string, p []result) {
	var rate, p50, p99, cpu, sys []float64
	for i := range f {
		rate = append(rate, f[i].rate/p[i].rate)
		p50 = append(p50, float64(p[i].p50)/float64(f[i].p50))
		p99 = append(p99, float64(p[i].p99)/float64(f[i].p99))
		cpu = append(cpu, float64(p[i].cpu)/float64(f[i].cpu))
		if f[i].sys > 0 {
			sys = append(sys, p[i].sys/f[i].sys)
		}
	}
	fmt.Printf("%-10s vs %-4s calls/s ×%s   p50 ×%s   p99 ×%s   cpu/call ×%s", mine, peer, stat(rate), stat(p50), stat(p99), stat(cpu))
	if len(sys) > 0 {
		fmt.Printf("   syscalls/call ×%s", stat(sys))
	}
	fmt.Println("   (>1: fastmq better)")
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// stat renders the median with min and max.
func stat(v []float64) string {
	s := benchkit.SpreadOf(v)
	return fmt.Sprintf("%.2f [%.2f–%.2f]", s.Median, s.Min, s.Max)
}

// run makes n calls from *callers goroutines and measures them.
func run(im impl, req []byte, n int) result {
	lat := make([][]time.Duration, *callers)
	var mu sync.Mutex
	left := n
	ctx := context.Background()
	cpu0 := cpuclock.Process()
	sys0 := benchkit.IOCalls()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range *callers {
		wg.Go(func() {
			for {
				mu.Lock()
				if left == 0 {
					mu.Unlock()
					return
				}
				left--
				mu.Unlock()
				t := time.Now()
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := im.call(cctx, req)
				cancel()
				must(err)
				lat[w] = append(lat[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	cpu := cpuclock.Process() - cpu0
	sys := float64(benchkit.IOCalls()-sys0) / float64(n)
	all := slices.Concat(lat...)
	slices.Sort(all)
	return result{rate: float64(n) / d.Seconds(), p50: benchkit.Percentile(all, 0.5), p99: benchkit.Percentile(all, 0.99), cpu: cpu / time.Duration(n), sys: sys}
}

func echo(ctx context.Context, req []byte) ([]byte, error) { return req, nil }

// setupFastMQ starts the FastMQ servers and client; tcpOnly keeps the
// servers off unix sockets.
func setupFastMQ(name string, tcpOnly bool) impl {
	mesh := discoverytest.NewMesh()
	var srvs []*rpc.Server
	for i := range *instances {
		node, err := mesh.Join(fmt.Sprintf("s%d", i))
		must(err)
		s, err := rpc.NewServer(rpc.ServerConfig{Service: "echo", Handler: echo, Discovery: node, NoLocalIPC: tcpOnly})
		must(err)
		srvs = append(srvs, s)
	}
	cn, err := mesh.Join("client")
	must(err)
	c, err := rpc.NewClient(rpc.ClientConfig{Service: "echo", Discovery: cn})
	must(err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	must(c.WaitForInstances(ctx, *instances))
	return impl{
		name: name,
		call: func(ctx context.Context, req []byte) error {
			_, err := c.Call(ctx, req, rpc.CallOptions{})
			return err
		},
		close: func() {
			c.Close()
			for _, s := range srvs {
				s.Close()
			}
			mesh.Close()
		},
	}
}

func setupNATS() impl {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	must(err)
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		must(fmt.Errorf("nats-server not ready"))
	}
	var conns []*nats.Conn
	for range *instances {
		nc, err := nats.Connect(ns.ClientURL())
		must(err)
		_, err = nc.QueueSubscribe("echo", "echo", func(m *nats.Msg) { m.Respond(m.Data) })
		must(err)
		must(nc.Flush())
		conns = append(conns, nc)
	}
	cc, err := nats.Connect(ns.ClientURL())
	must(err)
	return impl{
		name: "nats",
		call: func(ctx context.Context, req []byte) error {
			_, err := cc.RequestWithContext(ctx, "echo", req)
			return err
		},
		close: func() {
			cc.Close()
			for _, nc := range conns {
				nc.Close()
			}
			ns.Shutdown()
		},
	}
}

// rawCodec passes []byte through, so gRPC needs no generated code.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string   { return "raw" }
func (rawCodec) String() string { return "raw" }

var _ encoding.Codec = rawCodec{}

func setupGRPC() impl {
	desc := grpc.ServiceDesc{
		ServiceName: "bench.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Call",
			Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var b []byte
				if err := dec(&b); err != nil {
					return nil, err
				}
				return &b, nil
			},
		}},
	}
	var srvs []*grpc.Server
	var addrs []resolver.Address
	for range *instances {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		must(err)
		s := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
		s.RegisterService(&desc, struct{}{})
		go s.Serve(ln)
		srvs = append(srvs, s)
		addrs = append(addrs, resolver.Address{Addr: ln.Addr().String()})
	}
	r := manual.NewBuilderWithScheme("bench")
	r.InitialState(resolver.State{Addresses: addrs})
	conn, err := grpc.NewClient("bench:///echo",
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	must(err)
	return impl{
		name: "grpc",
		call: func(ctx context.Context, req []byte) error {
			var out []byte
			return conn.Invoke(ctx, "/bench.Echo/Call", &req, &out)
		},
		close: func() {
			conn.Close()
			for _, s := range srvs {
				s.Stop()
			}
		},
	}
}
