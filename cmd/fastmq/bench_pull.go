package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

func init() {
	var count, size, rate int
	var codec, syncPol string
	var groupInterval time.Duration
	cmd := &cobra.Command{
		Use:   "pull",
		Short: "End to end: append to a spool, serve it over tcp loopback, consume it",
		Long: `bench pull measures one publisher to one consumer over tcp loopback: records
are appended with the chosen sync policy while a consumer pulls them.

Without --rate it appends as fast as it can (4 group commits of 1024 records in
flight) and prints records/s and MB/s end to end. With --rate R it appends R
records per second, one at a time, and prints append-to-delivery latency
percentiles.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if count <= 0 || size <= 0 || rate < 0 {
				return errors.New("--count and --size must be positive and --rate not negative")
			}
			c, err := spool.ParseCodec(codec)
			if err != nil {
				return fmt.Errorf("--codec: %w", err)
			}
			sp, err := spool.ParseSyncPolicy(syncPol)
			if err != nil {
				return fmt.Errorf("--sync: %w", err)
			}
			return benchPull(cmd.Context(), cmd, count, size, rate, spool.Config{Codec: c, Sync: sp, GroupInterval: groupInterval})
		},
	}
	cmd.Flags().IntVar(&count, "count", 1_000_000, "records to pass end to end")
	cmd.Flags().IntVar(&size, "size", 100, "record value size in bytes")
	cmd.Flags().IntVar(&rate, "rate", 0, "append this many records per second and report latency (0: as fast as possible)")
	cmd.Flags().StringVar(&codec, "codec", "s2", "batch codec: none, s2 or zstd")
	cmd.Flags().StringVar(&syncPol, "sync", "group", "sync policy: each, group or none")
	cmd.Flags().DurationVar(&groupInterval, "group-interval", -1, "group commit: longest wait for more records before an fsync (negative: none, as a node's streams; 0: the spool default of 1ms)")
	benchCmd.AddCommand(cmd)
}

func benchPull(ctx context.Context, cmd *cobra.Command, count, size, rate int, scfg spool.Config) error {
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
	out := cmd.OutOrStdout()
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
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 && !sleepOrDone(ctx, d) {
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
