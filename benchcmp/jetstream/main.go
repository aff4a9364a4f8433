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
// garbage collections (fastmq.KeepHeapRoom; `fastmq` does so itself)
// unless GOGC is set, and the consumer processes of both run at
// --consumer-procs (GOMAXPROCS) and hold --batch records ahead.
//
// It is a separate module so that nats-server stays out of FastMQ's
// go.mod: cd benchcmp/jetstream && GOFLAGS=-mod=mod go run . --rounds 5
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	fastmqlib "github.com/fastmq/fastmq"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
		defer fastmqlib.KeepHeapRoom(fastmqlib.DefaultHeapRoom)()
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
	fmt.Printf("load average at start: %s\n", loadavg())
	res := map[string][]result{}
	for r := range *rounds {
		order := slices.Clone(impls)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, im := range order {
			var x result
			var err error
			c0 := readCPU()
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
			fmt.Println(cpuDuring(c0, readCPU()))
		}
	}
	fmt.Printf("load average at end: %s\n", loadavg())
	for _, im := range impls {
		var rates []float64
		for _, x := range res[im] {
			rates = append(rates, x.AckedPerS)
		}
		fmt.Printf("%-9s median %.0f acked/s (min %.0f, max %.0f)\n", im, median(rates), slices.Min(rates), slices.Max(rates))
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
		fmt.Printf("fastmq/jetstream acked/s: median %.2f (min %.2f, max %.2f) over %d rounds\n", median(ratios), slices.Min(ratios), slices.Max(ratios), len(ratios))
		if len(p99s) > 0 {
			fmt.Printf("jetstream/fastmq p99: median %.2f (min %.2f, max %.2f)\n", median(p99s), slices.Min(p99s), slices.Max(p99s))
		}
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// cpuTimes is the machine's CPU time (/proc/stat's first line, in
// clock ticks): all of it, and the parts spent idle, waiting for I/O and
// stolen by the hypervisor.
type cpuTimes struct{ total, idle, iowait, steal uint64 }

// readCPU reads /proc/stat's cpu line; zero where there is none.
func readCPU() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}
	}
	var t cpuTimes
	for i, s := range f[1:9] { // user to steal; guest time is in user already
		v, _ := strconv.ParseUint(s, 10, 64)
		t.total += v
		switch i {
		case 3:
			t.idle = v
		case 4:
			t.iowait = v
		case 7:
			t.steal = v
		}
	}
	return t
}

// cpuDuring says how the machine's CPU time went between a and b: the
// share the hypervisor stole and the share spent waiting for I/O, the two
// that make a round noisy on a virtual machine.
func cpuDuring(a, b cpuTimes) string {
	d := float64(b.total - a.total)
	if d <= 0 {
		return ""
	}
	return fmt.Sprintf("  (steal %.1f %%, iowait %.1f %%, idle %.0f %%)",
		100*float64(b.steal-a.steal)/d, 100*float64(b.iowait-a.iowait)/d, 100*float64(b.idle-a.idle)/d)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
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
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   chan report
	}
	var children []child
	defer func() {
		for _, c := range children {
			c.stdin.Close()
			c.cmd.Wait()
		}
	}()
	for i := range *consumers {
		cmd := exec.Command(exe, "--role", "consumer", "--url", ns.ClientURL(), "--batch", strconv.Itoa(*batch), "--rate", strconv.Itoa(*rate), "--count", strconv.Itoa(*count))
		cmd.Stderr = os.Stderr
		if *procs > 0 {
			cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(*procs))
		}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return res, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return res, err
		}
		if err := cmd.Start(); err != nil {
			return res, err
		}
		c := child{cmd, stdin, make(chan report, 1)}
		children = append(children, c)
		ready := make(chan error, 1)
		go func() {
			defer close(c.out)
			r := bufio.NewReader(stdout)
			if line, err := r.ReadString('\n'); err != nil || line != "ready\n" {
				ready <- fmt.Errorf("consumer %d did not start: %q %v", i, line, err)
				return
			}
			ready <- nil
			var rep report
			if json.NewDecoder(r).Decode(&rep) == nil {
				c.out <- rep
			}
		}()
		if err := <-ready; err != nil {
			return res, err
		}
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
	for _, c := range children {
		c.stdin.Close()
		rep, ok := <-c.out
		if !ok {
			return res, errors.New("a consumer ended without its report")
		}
		lat = append(lat, rep.LatNs...)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e3 }
		res.P50us, res.P99us = q(0.5), q(0.99)
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
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	cc.Stop()
	mu.Lock()
	defer mu.Unlock()
	return json.NewEncoder(os.Stdout).Encode(rep)
}
