// Command jetstreamcmp measures FastMQ's consumer groups against NATS
// JetStream on the same machine, in the same run, with the same
// workload: one publisher, three consumers in separate processes, 100 B
// records, each acknowledged explicitly. JetStream runs embedded
// (nats-server v2 in this process, file storage), with a durable pull
// consumer (AckExplicit) that three consumer processes share (Consume,
// Ack per message); FastMQ runs as `fastmq bench group` (a publisher
// process and three member processes).
//
// Each round runs both, in an order that alternates between rounds, and
// prints acked records/s (and, with --rate, append-to-delivery p50 and
// p99) with the shares of the machine's CPU time the hypervisor stole and
// I/O waits took meanwhile (what makes a round noisy on a virtual
// machine); at the end the ratio FastMQ/JetStream for the rate (and
// JetStream/FastMQ for p99, so above 1 means FastMQ is better): the
// median over the rounds, with min and max, and the load average.
//
// Every process of both sides keeps FastMQ's default heap room between
// garbage collections (heaproom.Keep; `fastmq` does so itself)
// unless GOGC is set, and the consumer processes of both run at
// --consumer-procs (GOMAXPROCS) and hold --batch records ahead.
//
// The statistics, the noise readings, the alternating rounds and the
// consumer processes are internal/benchkit's, as `fastmq bench group`'s
// are, so that both sides are measured the same way.
//
// It is in the benchcmp module so that nats-server stays out of FastMQ's
// go.mod: cd benchcmp/jetstream && GOFLAGS=-mod=mod go run . --rounds 5
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fastmq/fastmq/heaproom"
	"github.com/fastmq/fastmq/internal/benchkit"
)

var (
	rounds    = flag.Int("rounds", 5, "rounds; each runs both once")
	count     = flag.Int("count", 300000, "records per run")
	size      = flag.Int("size", 100, "record size in bytes (at least 8: the send time)")
	consumers = flag.Int("consumers", 3, "consumer (member) processes")
	rate      = flag.Int("rate", 0, "publish this many records per second and report latency (0: as fast as possible)")
	batch     = flag.Int("batch", 4096, "records a consumer holds ahead: JetStream's PullMaxMessages and fastmq's member buffer (bench group --buffer)")
	fastmq    = flag.String("fastmq", "", "the fastmq binary (default: built from ../.. into a temporary directory)")
	only      = flag.String("only", "", "run only jetstream or fastmq")
	procs     = flag.Int("consumer-procs", 1, "each consumer (member) process's GOMAXPROCS, for both (bench group --member-procs); 0: the runtime's default")
	early     = flag.Bool("visible-before-sync", false, "fastmq: serve records to every reader before their fdatasync (bench group --visible-before-sync)")
	afterSync = flag.Bool("lease-after-sync", false, "fastmq: lease records only once durable (bench group --lease-after-sync); by default they are leased once written, before their fdatasync, as JetStream delivers")
	minSync   = flag.Duration("min-sync-interval", 0, "fastmq: least time between two of the stream's fdatasyncs (bench group --min-sync-interval; 0: its default, a node's 500µs; negative: back to back); JetStream's file store syncs every 2 minutes by default")
	role      = flag.String("role", "", "internal: consumer")
	url       = flag.String("url", "", "internal: the NATS server's URL")
)

// result is one run's figures; the JSON of `fastmq bench group --json`.
type result struct {
	Impl      string  `json:"impl"`
	AckedPerS float64 `json:"acked_per_s"`
	P50us     float64 `json:"p50_us"`
	P99us     float64 `json:"p99_us"`
}

// report is what a consumer process prints when its stdin closes.
type report struct {
	Processed int     `json:"processed"`
	LatNs     []int64 `json:"lat_ns,omitempty"`
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "jetstreamcmp:", err)
		os.Exit(1)
	}
}

func main() {
	flag.Parse()
	if _, set := os.LookupEnv("GOGC"); !set {
		// The heap room fastmq's processes keep (its publisher and
		// members are fastmq commands), kept here too: JetStream's
		// server in this process and its consumer processes.
		defer heaproom.Keep(heaproom.Default)()
	}
	if *role == "consumer" {
		must(consume(*url))
		return
	}
	if *size < 8 {
		must(errors.New("--size must be at least 8"))
	}
	impls := []string{"fastmq", "jetstream"}
	if *only != "" {
		impls = []string{*only}
	}
	bin := *fastmq
	if bin == "" && slices.Contains(impls, "fastmq") {
		dir, err := os.MkdirTemp("", "jetstreamcmp-")
		must(err)
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "fastmq")
		c := exec.Command("go", "build", "-o", bin, "./cmd/fastmq")
		c.Dir = filepath.Join("..", "..")
		c.Stdout, c.Stderr = os.Stderr, os.Stderr
		must(c.Run())
	}
	fmt.Printf("load average at start: %s\n", benchkit.LoadAvg())
	res := map[string][]result{}
	for r := range *rounds {
		for _, im := range benchkit.Alternate(impls, r) {
			var x result
			var err error
			c0 := benchkit.ReadCPU()
			if im == "fastmq" {
				x, err = runFastMQ(bin)
			} else {
				x, err = runJetStream()
			}
			must(err)
			res[im] = append(res[im], x)
			fmt.Printf("round %d %-9s %9.0f acked/s", r+1, im, x.AckedPerS)
			if *rate > 0 {
				fmt.Printf("  p50 %6.0f µs  p99 %7.0f µs", x.P50us, x.P99us)
			}
			fmt.Println(benchkit.ReadCPU().Noise(c0))
		}
	}
	fmt.Printf("load average at end: %s\n", benchkit.LoadAvg())
	for _, im := range impls {
		var rates []float64
		for _, x := range res[im] {
			rates = append(rates, x.AckedPerS)
		}
		sp := benchkit.SpreadOf(rates)
		fmt.Printf("%-9s median %.0f acked/s (min %.0f, max %.0f)\n", im, sp.Median, sp.Min, sp.Max)
	}
	if len(impls) == 2 {
		var ratios, p99s []float64
		for i := range res["fastmq"] {
			f, j := res["fastmq"][i], res["jetstream"][i]
			ratios = append(ratios, f.AckedPerS/j.AckedPerS)
			if *rate > 0 && f.P99us > 0 {
				p99s = append(p99s, j.P99us/f.P99us)
			}
		}
		fmt.Printf("fastmq/jetstream acked/s: median %s over %d rounds\n", benchkit.SpreadOf(ratios), len(ratios))
		if len(p99s) > 0 {
			fmt.Printf("jetstream/fastmq p99: median %s\n", benchkit.SpreadOf(p99s))
		}
	}
}

// runFastMQ runs `fastmq bench group` once.
func runFastMQ(bin string) (result, error) {
	c := exec.Command(bin, "bench", "group", "--json", "--count", strconv.Itoa(*count), "--size", strconv.Itoa(*size),
		"--members", strconv.Itoa(*consumers), "--rate", strconv.Itoa(*rate), "--buffer", strconv.Itoa(*batch))
	if *early {
		c.Args = append(c.Args, "--visible-before-sync")
	}
	if *afterSync {
		c.Args = append(c.Args, "--lease-after-sync")
	}
	// Always, 0 too: bench group's own default is 1.
	c.Args = append(c.Args, "--member-procs", strconv.Itoa(*procs))
	// Each member may hold its batch leased, as JetStream's consumer
	// (MaxAckPending below) lets every consumer.
	c.Args = append(c.Args, "--max-ack-pending", strconv.Itoa(max(16384, *batch)))
	if *minSync != 0 { // negative: back to back even under --visible-before-sync
		c.Args = append(c.Args, "--min-sync-interval", minSync.String())
	}
	c.Stderr = os.Stderr
	out, err := c.Output()
	if err != nil {
		return result{}, fmt.Errorf("fastmq bench group: %w", err)
	}
	var x result
	if err := json.Unmarshal(out, &x); err != nil {
		return x, fmt.Errorf("fastmq bench group printed %q: %w", out, err)
	}
	return x, nil
}

// runJetStream runs one round: an embedded server with file storage in a
// fresh directory, a stream, a durable pull consumer with explicit acks,
// consumer processes, and this process publishing.
func runJetStream() (result, error) {
	res := result{Impl: "jetstream"}
	dir, err := os.MkdirTemp("", "jetstreamcmp-store-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, JetStream: true, StoreDir: dir})
	if err != nil {
		return res, err
	}
	go ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		return res, errors.New("nats server not ready")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return res, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench"}, Storage: jetstream.FileStorage}); err != nil {
		return res, err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "BENCH", jetstream.ConsumerConfig{Durable: "g", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: max(16384, *consumers**batch*3/2)})
	if err != nil {
		return res, err
	}
	exe, err := os.Executable()
	if err != nil {
		return res, err
	}
	var children []*benchkit.Child[report]
	defer func() {
		for _, c := range children {
			c.Wait()
		}
	}()
	for i := range *consumers {
		cmd := exec.Command(exe, "--role", "consumer", "--url", ns.ClientURL(), "--batch", strconv.Itoa(*batch), "--rate", strconv.Itoa(*rate), "--count", strconv.Itoa(*count))
		if *procs > 0 {
			cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(*procs))
		}
		c, err := benchkit.StartChild[report](cmd)
		if err != nil {
			return res, fmt.Errorf("consumer %d: %w", i, err)
		}
		children = append(children, c)
	}
	payload := make([]byte, *size)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	start := time.Now()
	var interval time.Duration
	if *rate > 0 {
		interval = time.Second / time.Duration(*rate)
	}
	for i := range *count {
		if interval > 0 {
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
				time.Sleep(d)
			}
		}
		p := slices.Clone(payload)
		binary.BigEndian.PutUint64(p, uint64(time.Now().UnixNano()))
		if _, err := js.PublishAsync("bench", p, jetstream.WithStallWait(time.Minute)); err != nil {
			return res, err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return res, ctx.Err()
	}
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			return res, err
		}
		if info.AckFloor.Stream >= uint64(*count) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	res.AckedPerS = float64(*count) / time.Since(start).Seconds()
	var lat []int64
	for i, c := range children {
		rep, err := c.Report()
		if err != nil {
			return res, fmt.Errorf("consumer %d: %w", i, err)
		}
		lat = append(lat, rep.LatNs...)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		res.P50us, res.P99us = float64(benchkit.Percentile(lat, 0.5))/1e3, float64(benchkit.Percentile(lat, 0.99))/1e3
	}
	return res, nil
}

// consume is a consumer process: it pulls from the durable consumer and
// acks every message until its stdin closes, then prints its report.
func consume(url string) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx := context.Background()
	cons, err := js.Consumer(ctx, "BENCH", "g")
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var rep report
	if *rate > 0 {
		rep.LatNs = make([]int64, 0, *count)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		now := time.Now().UnixNano()
		d := msg.Data()
		mu.Lock()
		rep.Processed++
		if *rate > 0 && len(d) >= 8 {
			rep.LatNs = append(rep.LatNs, now-int64(binary.BigEndian.Uint64(d)))
		}
		mu.Unlock()
		msg.Ack()
	}, jetstream.PullMaxMessages(*batch))
	if err != nil {
		return err
	}
	if err := benchkit.Ready(os.Stdout); err != nil {
		return err
	}
	benchkit.WaitForStop()
	cc.Stop()
	mu.Lock()
	defer mu.Unlock()
	return json.NewEncoder(os.Stdout).Encode(rep)
}
