package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/ctxutil"
	"github.com/fastmq/fastmq/spool"
)

// SoakOptions configures Soak.
type SoakOptions struct {
	Duration  time.Duration // how long to run
	Interval  time.Duration // how often to print a sample; default 1 min
	Consumers int           // consumer nodes; default 8
	Rate      int           // records per second published; default 2000
	Size      int           // record value size; default 100
	// Churn is a consumer node's mean lifetime: each leaves after a random
	// time between half and one and a half of it, and joins again on the
	// same data (resuming from its committed offsets). Default 10 s.
	Churn time.Duration
}

// soakSample is one measurement of this process.
type soakSample struct {
	at         time.Duration
	rss        float64 // MiB
	goroutines int
	fds        int
	published  uint64
	delivered  uint64
	joins      uint64
	joinErrs   uint64
}

// soakWarmUp bounds the wait for the first delivery.
const soakWarmUp = time.Minute

// Soak runs one publisher node and o.Consumers consumer nodes in this
// process, all on loopback gossip, for o.Duration: the publisher appends
// o.Rate records per second to one stream (with byte retention, so the
// spool rolls and deletes segments), every consumer node pulls it, and
// each consumer node leaves (a graceful Shutdown, or every fourth time an
// abrupt Close) and joins again after a random lifetime. Every o.Interval,
// and at the end, it prints the process's resident memory, goroutines and
// open files with the records published and delivered and the joins so
// far (and the joins that failed and were tried again), and at the end the slope of each per minute (least squares over the
// samples after the first interval, the warm-up). A leak shows as a
// steady positive slope. The clock starts at the first delivery, waited
// for up to soakWarmUp.
func Soak(ctx context.Context, out io.Writer, o SoakOptions) error {
	if o.Duration <= 0 {
		return errors.New("bench: soak needs a positive duration")
	}
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	if o.Consumers <= 0 {
		o.Consumers = 8
	}
	if o.Rate <= 0 {
		o.Rate = 2000
	}
	if o.Size <= 0 {
		o.Size = 100
	}
	if o.Churn <= 0 {
		o.Churn = 10 * time.Second
	}
	dir, err := os.MkdirTemp("", "fastmq-bench-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pub, err := fastmq.New(fastmq.Config{Name: "soak-pub", DataDir: filepath.Join(dir, "pub"),
		Spool: spool.Config{SegmentBytes: 4 << 20, RetentionBytes: 32 << 20, RetentionInterval: 5 * time.Second}})
	if err != nil {
		return err
	}
	defer pub.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var published, delivered, joins, joinErrs atomic.Uint64
	var wg sync.WaitGroup
	errc := make(chan error, o.Consumers+1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errc <- soakPublish(ctx, pub, o, &published)
	}()
	for i := range o.Consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- soakConsume(ctx, filepath.Join(dir, "c"+strconv.Itoa(i)), "soak-c"+strconv.Itoa(i), pub.GossipAddr(), o.Churn, i, &delivered, &joins, &joinErrs)
		}()
	}

	// The run starts once records flow: on a loaded host the first joins
	// and fetches may take longer than a consumer's lifetime.
	for warm := time.Now(); delivered.Load() == 0; {
		if time.Since(warm) > soakWarmUp {
			cancel()
			wg.Wait()
			return fmt.Errorf("soak: no record delivered in the first %v", soakWarmUp)
		}
		if !ctxutil.Sleep(ctx, 50*time.Millisecond) {
			break
		}
	}
	start := time.Now()
	var samples []soakSample
	sample := func() {
		s := measure()
		s.at = time.Since(start)
		s.published, s.delivered, s.joins, s.joinErrs = published.Load(), delivered.Load(), joins.Load(), joinErrs.Load()
		samples = append(samples, s)
		fmt.Fprintf(out, "%8s  rss %7.1f MiB  goroutines %5d  open files %4d  published %10d  delivered %11d  joins %5d (failed %d)\n",
			s.at.Round(time.Second), s.rss, s.goroutines, s.fds, s.published, s.delivered, s.joins, s.joinErrs)
	}
	fmt.Fprintf(out, "soak: 1 publisher at %d records/s of %d B, %d consumer nodes with a lifetime of %v ±50%%, for %v\n",
		o.Rate, o.Size, o.Consumers, o.Churn, o.Duration)
	sample()
	tick := time.NewTicker(o.Interval)
	end := time.NewTimer(o.Duration)
	for done := false; !done; {
		select {
		case <-tick.C:
			sample()
		case <-end.C:
			done = true
		case <-ctx.Done():
			done = true
		}
	}
	tick.Stop()
	end.Stop()
	if time.Since(start)-samples[len(samples)-1].at > time.Second {
		sample() // the end, still under load
	}
	printSlopes(out, samples, o.Interval, o.Consumers)
	cancel()
	wg.Wait()
	close(errc)
	var errs []error
	for err := range errc {
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	pub.Close()
	runtime.GC()
	s := measure()
	fmt.Fprintf(out, "after every node closed: rss %.1f MiB, goroutines %d, open files %d\n", s.rss, s.goroutines, s.fds)
	return errors.Join(errs...)
}

// soakPublish appends o.Rate records per second in batches every 10 ms.
func soakPublish(ctx context.Context, pub *fastmq.Node, o SoakOptions, published *atomic.Uint64) error {
	const tick = 10 * time.Millisecond
	per := max(1, o.Rate/100)
	value := bytes.Repeat([]byte("x"), o.Size)
	t := time.NewTicker(tick)
	defer t.Stop()
	recs := make([]spool.Record, 10*per)
	for i := range recs {
		recs[i].Value = value
	}
	start := time.Now()
	var sent uint64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		// Catch up with the rate when an fsync took longer than a tick,
		// at most ten ticks' worth at once.
		k := min(uint64(time.Since(start).Seconds()*float64(o.Rate))-min(sent, uint64(time.Since(start).Seconds()*float64(o.Rate))), uint64(10*per))
		if k == 0 {
			continue
		}
		if _, err := pub.Append(ctx, "soak", recs[:k]...); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("publish: %w", err)
		}
		sent += k
		published.Add(k)
	}
}

// soakConsume runs one consumer slot until ctx ends: a node that joins
// the publisher's mesh, consumes and acknowledges for a random lifetime,
// and leaves; then again on the same data directory and name.
func soakConsume(ctx context.Context, dir, name, seed string, churn time.Duration, slot int, delivered, joins, joinErrs *atomic.Uint64) error {
	for gen := 0; ctx.Err() == nil; gen++ {
		n, err := fastmq.New(fastmq.Config{Name: name, DataDir: dir, Seeds: []string{seed}})
		if err != nil {
			// A join can time out on an overloaded host (the local
			// profile's TCP timeout is 1 s): count it and try again.
			joinErrs.Add(1)
			if !ctxutil.Sleep(ctx, time.Second) {
				return nil
			}
			continue
		}
		joins.Add(1)
		c, err := n.Consume(fastmq.ConsumerConfig{Stream: "soak", Name: "soak"})
		if err != nil {
			n.Close()
			return fmt.Errorf("consumer %s: %w", name, err)
		}
		life := churn/2 + rand.N(churn)
		lctx, cancel := context.WithTimeout(ctx, life)
		for {
			m, err := c.Next(lctx)
			if err != nil {
				break // end of life (or of the run); a fetch error is the lifetime's end too
			}
			c.Ack(m)
			delivered.Add(1)
		}
		cancel()
		if (gen+slot)%4 == 3 {
			n.Close() // abrupt: the mesh sees it fail
		} else {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			n.Shutdown(sctx) // graceful: commits and leaves
			cancel()
		}
		// A node that left comes back after a short pause, as a restarted
		// process would.
		if !ctxutil.Sleep(ctx, 100*time.Millisecond) {
			return nil
		}
	}
	return nil
}

// measure reads this process's resident set, goroutines and open files.
func measure() soakSample {
	var s soakSample
	s.goroutines = runtime.NumGoroutine()
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range bytes.Split(b, []byte("\n")) {
			if v, ok := bytes.CutPrefix(l, []byte("VmRSS:")); ok {
				kb, _ := strconv.ParseFloat(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))), 64)
				s.rss = kb / 1024
			}
		}
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		s.fds = len(ents)
	}
	return s
}

// printSlopes prints the least-squares slope per minute of each figure
// over the samples after the first interval (over all when there are too
// few).
func printSlopes(out io.Writer, samples []soakSample, interval time.Duration, consumers int) {
	use := samples
	var skip int
	for skip < len(samples) && samples[skip].at < interval {
		skip++
	}
	if len(samples)-skip >= 3 {
		use = samples[skip:]
	}
	if len(use) < 2 {
		return
	}
	slope := func(y func(soakSample) float64) float64 {
		var n, sx, sy, sxx, sxy float64
		for _, s := range use {
			x := s.at.Minutes()
			n++
			sx += x
			sy += y(s)
			sxx += x * x
			sxy += x * y(s)
		}
		d := n*sxx - sx*sx
		if d == 0 {
			return 0
		}
		return (n*sxy - sx*sy) / d
	}
	first, last := use[0], use[len(use)-1]
	fmt.Fprintf(out, "slope per minute from %v to %v (%d samples): rss %+.2f MiB, goroutines %+.2f, open files %+.2f\n",
		first.at.Round(time.Second), last.at.Round(time.Second), len(use),
		slope(func(s soakSample) float64 { return s.rss }),
		slope(func(s soakSample) float64 { return float64(s.goroutines) }),
		slope(func(s soakSample) float64 { return float64(s.fds) }))
	if last.published > 0 {
		fmt.Fprintf(out, "delivered %d records for %d published to %d consumer nodes (%.1f%% of every record to every node) over %d joins\n",
			last.delivered, last.published, consumers, 100*float64(last.delivered)/float64(last.published)/float64(consumers), last.joins)
	}
}
