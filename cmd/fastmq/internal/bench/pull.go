package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/fastmq/fastmq/internal/ctxutil"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// Pull appends count records of size bytes to a spool in scfg (its Dir
// is a temporary directory), serves it over tcp loopback, consumes it and
// prints the figures to out. With rate > 0 it appends rate records per
// second and prints latency percentiles.
func Pull(ctx context.Context, out io.Writer, count, size, rate int, scfg spool.Config) error {
	dir, err := os.MkdirTemp("", "fastmq-bench-pull-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	scfg.Dir = dir
	l, err := spool.Open(scfg)
	if err != nil {
		return err
	}
	defer l.Close()
	srv, err := pull.NewServer(pull.ServerConfig{Lookup: func(string) (*spool.Log, bool) { return l, true }})
	if err != nil {
		return err
	}
	defer srv.Close()
	c, err := pull.NewConsumer(pull.ConsumerConfig{Stream: "bench", Publishers: map[string]string{"p": srv.Endpoints()[0]}, MaxBytes: 4 << 20, Buffer: 16})
	if err != nil {
		return err
	}
	defer c.Close()
	value := make([]byte, size)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- produce(ctx, l, value, count, rate) }()
	var lat []time.Duration
	if rate > 0 {
		lat = make([]time.Duration, 0, count)
	}
	for i := 0; i < count; i++ {
		m, err := c.Next(ctx)
		if err != nil {
			cancel()
			<-errc // the producer ends before the spool closes
			return err
		}
		if rate > 0 {
			lat = append(lat, time.Since(m.Time))
		}
		c.Ack(m)
	}
	el := time.Since(start)
	if err := <-errc; err != nil {
		return err
	}
	fmt.Fprintf(out, "pull end to end: %d records of %d B, codec %s, sync %s, tcp loopback\n", count, size, scfg.Codec, scfg.Sync)
	fmt.Fprintf(out, "  %.0f records/s, %.1f MB/s, %.2fs\n", float64(count)/el.Seconds(), float64(count*size)/el.Seconds()/1e6, el.Seconds())
	if rate > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
		fmt.Fprintf(out, "  append-to-delivery latency at %d records/s: p50 %v  p90 %v  p99 %v  max %v\n", rate, q(0.5), q(0.9), q(0.99), lat[len(lat)-1])
	}
	return nil
}

// produce appends count records, either as fast as possible with several
// group commits in flight, or at rate records per second.
func produce(ctx context.Context, l *spool.Log, value []byte, count, rate int) error {
	if rate > 0 {
		interval := time.Second / time.Duration(rate)
		start := time.Now()
		acks := make(chan *spool.Ack, 4096)
		done := make(chan error, 1)
		go func() {
			for a := range acks {
				if _, err := a.Wait(ctx); err != nil {
					done <- err
					for range acks {
					}
					return
				}
			}
			done <- nil
		}()
		for i := 0; i < count; i++ {
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 && !ctxutil.Sleep(ctx, d) {
				close(acks)
				<-done
				return ctx.Err()
			}
			a, err := l.AppendAsync(ctx, spool.Record{Value: value, Time: time.Now()})
			if err != nil {
				close(acks)
				<-done
				return err
			}
			acks <- a
		}
		close(acks)
		return <-done
	}
	const inflight = 4
	acks := make([]*spool.Ack, inflight)
	bufs := make([][]spool.Record, inflight)
	for i := range bufs {
		bufs[i] = make([]spool.Record, 1024)
	}
	for left, slot := count, 0; left > 0; slot = (slot + 1) % inflight {
		if acks[slot] != nil {
			if _, err := acks[slot].Wait(ctx); err != nil {
				return err
			}
		}
		k := min(left, 1024)
		recs := bufs[slot][:k]
		for i := range recs {
			recs[i] = spool.Record{Value: value}
		}
		a, err := l.AppendAsync(ctx, recs...)
		if err != nil {
			return err
		}
		acks[slot] = a
		left -= k
	}
	for _, a := range acks {
		if a != nil {
			if _, err := a.Wait(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}
