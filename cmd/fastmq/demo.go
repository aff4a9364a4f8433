package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/collect"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// demoOptions are the demo's settings.
type demoOptions struct {
	Duration time.Duration
	Rate     int // lines per second per shipper
	Dir      string
	Keep     bool
}

func init() {
	var opts demoOptions
	demo := &cobra.Command{
		Use:   "demo",
		Short: "Run a small log-shipping mesh on loopback and show that nothing is lost",
		Long: `demo runs the main job on nothing but loopback and a temporary directory:
three shipper nodes follow access logs that are being written, a collector and
an independent consumer find them by gossip and pull. Midway one shipper and
then the collector are killed and restarted. At the end the output is checked
line by line: every produced line collected exactly once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Duration <= 0 {
				return errors.New("--duration must be positive")
			}
			if opts.Rate <= 0 || opts.Rate > 1_000_000 {
				return errors.New("--rate must be between 1 and 1000000")
			}
			return runDemo(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	demo.Flags().DurationVar(&opts.Duration, "duration", 20*time.Second, "how long the shippers produce")
	demo.Flags().IntVar(&opts.Rate, "rate", 5000, "access-log lines per second per shipper")
	demo.Flags().StringVar(&opts.Dir, "dir", "", "working directory (default: a new temporary directory)")
	demo.Flags().BoolVar(&opts.Keep, "keep", false, "keep the working directory")
	rootCmd.AddCommand(demo)
}

const demoStream = "access-log"

// demoShipper is one shipper: a log writer and a node that ships the log.
type demoShipper struct {
	name    string
	logPath string
	data    string
	written atomic.Uint64

	mu     sync.Mutex
	node   *fastmq.Node
	cancel context.CancelFunc
	done   chan error
}

// demoSummary is what the demo proves at the end.
type demoSummary struct {
	Produced, Collected, Duplicates, Lost, ConsumerSeen uint64
}

func runDemo(ctx context.Context, opts demoOptions, w io.Writer) (err error) {
	dir := opts.Dir
	if dir == "" {
		dir, err = os.MkdirTemp("", "fastmq-demo-")
		if err != nil {
			return err
		}
		if !opts.Keep {
			defer os.RemoveAll(dir)
		}
	}
	fmt.Fprintf(w, "fastmq demo: 3 shippers, 1 collector, 1 independent consumer on loopback; working directory %s\n", dir)
	sum, err := demoRun(ctx, opts, dir, w)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nsummary: produced %d, collected %d, duplicates %d, lost %d; independent consumer saw %d\n",
		sum.Produced, sum.Collected, sum.Duplicates, sum.Lost, sum.ConsumerSeen)
	if sum.Lost != 0 || sum.Duplicates != 0 {
		return fmt.Errorf("demo: %d lines lost, %d duplicated", sum.Lost, sum.Duplicates)
	}
	return nil
}

func demoRun(ctx context.Context, opts demoOptions, dir string, w io.Writer) (demoSummary, error) {
	var sum demoSummary
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	shippers := make([]*demoShipper, 3)
	var seeds []string
	for i := range shippers {
		s := &demoShipper{
			name:    fmt.Sprintf("shipper-%d", i+1),
			logPath: filepath.Join(dir, fmt.Sprintf("shipper-%d-access.log", i+1)),
			data:    filepath.Join(dir, fmt.Sprintf("shipper-%d", i+1)),
		}
		shippers[i] = s
		if err := s.start(seeds); err != nil {
			return sum, err
		}
		defer s.stop()
		seeds = append(seeds, s.gossip())
	}

	// The generators write access logs while the shippers follow them.
	genCtx, stopGen := context.WithTimeout(ctx, opts.Duration)
	defer stopGen()
	var gen sync.WaitGroup
	genErr := make(chan error, len(shippers))
	for _, s := range shippers {
		gen.Add(1)
		go func() {
			defer gen.Done()
			if err := s.generate(genCtx, opts.Rate); err != nil {
				genErr <- err
			}
		}()
	}
	defer gen.Wait()

	col := &demoCollector{out: filepath.Join(dir, "collected"), data: filepath.Join(dir, "collector")}
	if err := col.start(seeds); err != nil {
		return sum, err
	}
	defer col.stop()

	// An independent consumer: gets every record too, with its own offsets.
	auditNode, err := fastmq.New(fastmq.Config{Name: "auditor", DataDir: filepath.Join(dir, "auditor"), Seeds: seeds})
	if err != nil {
		return sum, err
	}
	defer auditNode.Close()
	audit, err := auditNode.Consume(fastmq.ConsumerConfig{Stream: demoStream, Name: "audit"})
	if err != nil {
		return sum, err
	}
	var auditSeen atomic.Uint64
	auditSet := make(map[string]struct{})
	var auditWG sync.WaitGroup
	auditWG.Add(1)
	go func() {
		defer auditWG.Done()
		for {
			m, err := audit.Next(ctx)
			if err != nil {
				return
			}
			auditSet[string(seqOf(m.Value))] = struct{}{}
			auditSeen.Store(uint64(len(auditSet)))
			audit.Ack(m)
		}
	}()
	defer auditWG.Wait()
	defer cancel()

	start := time.Now()
	killShipperAt := opts.Duration * 3 / 10
	killCollectorAt := opts.Duration * 55 / 100
	var shipperKilled, collectorKilled bool
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastCollected uint64
	fmt.Fprintf(w, "%6s %10s %10s %10s %10s %8s\n", "time", "produced", "spooled", "collected", "consumer", "rec/s")
	report := func() {
		var produced, spooled uint64
		for _, s := range shippers {
			produced += s.written.Load()
			spooled += s.spooled()
		}
		collected := col.lines()
		rate := int64(collected) - int64(lastCollected)
		fmt.Fprintf(w, "%5.0fs %10d %10d %10d %10d %8d\n", time.Since(start).Seconds(), produced, spooled, collected, auditSeen.Load(), max(rate, 0))
		lastCollected = collected
	}
	for genCtx.Err() == nil {
		select {
		case <-ctx.Done():
			return sum, ctx.Err()
		case err := <-genErr:
			return sum, err
		case <-genCtx.Done():
		case <-tick.C:
			report()
			el := time.Since(start)
			if !shipperKilled && el >= killShipperAt {
				shipperKilled = true
				fmt.Fprintf(w, "-- killing %s (its log keeps growing while it is down)\n", shippers[1].name)
				shippers[1].kill()
				time.Sleep(time.Second)
				if err := shippers[1].start(seeds); err != nil {
					return sum, err
				}
				fmt.Fprintf(w, "-- restarted %s\n", shippers[1].name)
			}
			if !collectorKilled && el >= killCollectorAt {
				collectorKilled = true
				fmt.Fprintln(w, "-- killing the collector")
				col.kill()
				time.Sleep(time.Second)
				if err := col.start(seeds); err != nil {
					return sum, err
				}
				fmt.Fprintln(w, "-- restarted the collector")
			}
		}
	}
	gen.Wait()
	for _, s := range shippers {
		sum.Produced += s.written.Load()
	}
	fmt.Fprintf(w, "-- producers stopped after %d lines; draining\n", sum.Produced)
	drainCtx, drainCancel := context.WithTimeout(ctx, 30*time.Second)
	defer drainCancel()
	for col.lines() < sum.Produced || auditSeen.Load() < sum.Produced {
		select {
		case <-drainCtx.Done():
			fmt.Fprintln(w, "-- drain timed out")
			goto done
		case <-tick.C:
			report()
		}
	}
	report()
done:
	col.stop()
	collected, dups, err := countCollected(col.out)
	if err != nil {
		return sum, err
	}
	sum.Collected, sum.Duplicates = collected, dups
	sum.ConsumerSeen = auditSeen.Load()
	if unique := collected - dups; unique < sum.Produced {
		sum.Lost = sum.Produced - unique
	}
	return sum, nil
}

func (s *demoShipper) start(seeds []string) error {
	n, err := fastmq.New(fastmq.Config{
		Name: s.name, DataDir: s.data, Seeds: seeds, RetryJoin: true,
		Spool: spool.Config{Codec: spool.CodecS2},
	})
	if err != nil {
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	if _, err := n.Stream(demoStream); err != nil {
		n.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- shipFiles(ctx, n, demoStream, []string{s.logPath}, false) }()
	s.mu.Lock()
	s.node, s.cancel, s.done = n, cancel, done
	s.mu.Unlock()
	return nil
}

func (s *demoShipper) gossip() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.node.GossipAddr()
}

func (s *demoShipper) spooled() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node == nil {
		return 0
	}
	l, err := s.node.Stream(demoStream)
	if err != nil {
		return 0
	}
	return l.NextOffset()
}

// kill stops the shipper abruptly: no graceful leave, so the mesh sees it
// fail.
func (s *demoShipper) kill() {
	s.mu.Lock()
	n, cancel, done := s.node, s.cancel, s.done
	s.node = nil
	s.mu.Unlock()
	if n == nil {
		return
	}
	cancel()
	<-done
	n.Close()
}

func (s *demoShipper) stop() {
	s.mu.Lock()
	n, cancel, done := s.node, s.cancel, s.done
	s.node = nil
	s.mu.Unlock()
	if n == nil {
		return
	}
	cancel()
	<-done
	ctx, c := context.WithTimeout(context.Background(), 5*time.Second)
	defer c()
	n.Shutdown(ctx)
}

var demoPaths = []string{"/", "/index.html", "/api/items", "/api/items/42", "/api/cart", "/login", "/static/app.js", "/static/style.css", "/healthz"}
var demoAgents = []string{"curl/8.5.0", "Mozilla/5.0 (X11; Linux x86_64)", "Go-http-client/1.1", "Prometheus/2.53"}

// generate appends access-log lines to the shipper's log at rate lines/s
// until ctx ends. Every line ends with a unique sequence tag.
func (s *demoShipper) generate(ctx context.Context, rate int) error {
	f, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 64<<10)
	perTick := rate / 100
	if perTick < 1 {
		perTick = 1
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	rng := rand.New(rand.NewPCG(uint64(len(s.name)), uint64(time.Now().UnixNano())))
	var seq uint64
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			for i := 0; i < perTick; i++ {
				seq++
				status := 200
				if rng.IntN(20) == 0 {
					status = 404
				}
				fmt.Fprintf(bw, "10.%d.%d.%d - - [%s] \"GET %s HTTP/1.1\" %d %d \"-\" \"%s\" seq=%s:%d\n",
					rng.IntN(256), rng.IntN(256), rng.IntN(256), now.Format("02/Jan/2006:15:04:05 -0700"),
					demoPaths[rng.IntN(len(demoPaths))], status, 200+rng.IntN(5000), demoAgents[rng.IntN(len(demoAgents))], s.name, seq)
			}
			if err := bw.Flush(); err != nil {
				return err
			}
			s.written.Store(seq)
		}
	}
}

// demoCollector is the collector node.
type demoCollector struct {
	out, data string
	mu        sync.Mutex
	node      *fastmq.Node
	col       *collect.Collector
	cancel    context.CancelFunc
	done      chan error
	base      uint64
}

func (c *demoCollector) start(seeds []string) error {
	n, err := fastmq.New(fastmq.Config{Name: "collector", DataDir: c.data, Seeds: seeds, RetryJoin: true})
	if err != nil {
		return err
	}
	col, err := collect.New(collect.Config{Dir: c.out, Stream: demoStream, Discovery: n.Membership(), Start: pull.Earliest()})
	if err != nil {
		n.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- col.Run(ctx) }()
	c.mu.Lock()
	c.node, c.col, c.cancel, c.done = n, col, cancel, done
	c.mu.Unlock()
	return nil
}

// lines returns the lines collected so far, across restarts.
func (c *demoCollector) lines() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.col == nil {
		return c.base
	}
	var n uint64
	for _, next := range c.col.Stats().Files {
		n += next
	}
	// A restarted collector knows a publisher's position once it pulls
	// from it again; until then show what was collected before.
	return max(n, c.base)
}

func (c *demoCollector) kill() { c.halt(false) }
func (c *demoCollector) stop() { c.halt(true) }

func (c *demoCollector) halt(graceful bool) {
	base := c.lines()
	c.mu.Lock()
	n, col, cancel, done := c.node, c.col, c.cancel, c.done
	c.node, c.col, c.base = nil, nil, base
	c.mu.Unlock()
	if n == nil {
		return
	}
	cancel()
	<-done
	col.Close()
	if graceful {
		ctx, cl := context.WithTimeout(context.Background(), 5*time.Second)
		defer cl()
		n.Shutdown(ctx)
		return
	}
	n.Close()
}

// seqOf returns the "seq=..." tag of a demo line.
func seqOf(line []byte) []byte {
	if i := bytes.LastIndex(line, []byte(" seq=")); i >= 0 {
		return line[i+5:]
	}
	return line
}

// countCollected reads the collector's files and counts lines and
// duplicated sequence tags.
func countCollected(dir string) (lines, dups uint64, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return 0, 0, err
	}
	seen := make(map[string]struct{})
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return 0, 0, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines++
			k := string(seqOf(sc.Bytes()))
			if _, ok := seen[k]; ok {
				dups++
			}
			seen[k] = struct{}{}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return 0, 0, err
		}
	}
	return lines, dups, nil
}
