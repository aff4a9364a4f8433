package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/benchkit"
	"github.com/fastmq/fastmq/internal/ctxutil"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// Pull appends count records of size bytes to a spool in scfg (its Dir
// is a temporary directory), serves it over tcp loopback, consumes it and
// prints the figures to out. With rate > 0 it appends rate records per
// second and prints latency percentiles.
func Pull(ctx context.Context, out io.Writer, count, size, rate int, scfg spool.Config) error {
	scfg.MinSyncInterval = nodeSyncInterval(scfg.MinSyncInterval, scfg.VisibleBeforeSync)
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
	var served []atomic.Int64 // by offset, with --rate: when the server sent it (unix ns)
	if rate > 0 {
		served = make([]atomic.Int64, count)
	}
	base := l.NextOffset()
	onServed := func(_ string, from, next uint64) {
		now := time.Now().UnixNano()
		for o := max(from, base); o < next && o-base < uint64(len(served)); o++ {
			served[o-base].CompareAndSwap(0, now)
		}
	}
	srv, err := pull.NewServer(pull.ServerConfig{Lookup: func(string) (*spool.Log, bool) { return l, true }, Served: onServed})
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
	var durable []time.Time // by offset, with --rate: when its Append was acknowledged
	var delivered []time.Time
	var appended []time.Time
	if rate > 0 {
		durable = make([]time.Time, count)
		delivered = make([]time.Time, count)
		appended = make([]time.Time, count)
	}
	go func() { errc <- produce(ctx, l, value, count, rate, durable) }()
	for i := 0; i < count; i++ {
		m, err := c.Next(ctx)
		if err != nil {
			cancel()
			<-errc // the producer ends before the spool closes
			return err
		}
		if rate > 0 {
			if k := m.Offset - base; k < uint64(count) {
				delivered[k], appended[k] = time.Now(), m.Time
			}
		}
		c.Ack(m)
	}
	el := time.Since(start)
	if err := <-errc; err != nil {
		return err
	}
	early := ""
	if scfg.VisibleBeforeSync {
		early = ", visible before sync"
	}
	fmt.Fprintf(out, "pull end to end: %d records of %d B, codec %s, sync %s%s, tcp loopback\n", count, size, scfg.Codec, scfg.Sync, early)
	fmt.Fprintf(out, "  %.0f records/s, %.1f MB/s, %.2fs\n", float64(count)/el.Seconds(), float64(count*size)/el.Seconds()/1e6, el.Seconds())
	if rate > 0 {
		var total, toDurable, toServed, toDelivered []time.Duration
		for k := range delivered {
			sv := served[k].Load()
			if delivered[k].IsZero() || durable[k].IsZero() || sv == 0 {
				continue
			}
			at := time.Unix(0, sv)
			total = append(total, delivered[k].Sub(appended[k]))
			toDurable = append(toDurable, durable[k].Sub(appended[k]))
			toServed = append(toServed, at.Sub(durable[k]))
			toDelivered = append(toDelivered, delivered[k].Sub(at))
		}
		line := func(what string, lat []time.Duration) {
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			q := func(p float64) time.Duration { return benchkit.Percentile(lat, p) }
			fmt.Fprintf(out, "  %s: p50 %v  p90 %v  p99 %v  max %v\n", what, q(0.5), q(0.9), q(0.99), lat[len(lat)-1])
		}
		if len(total) > 0 {
			fsyncLine(out, l.FsyncStats(), count)
			line("  append to durable (fsync and acknowledgement)", toDurable)
			if scfg.VisibleBeforeSync {
				line("  durable to served (negative: served before durable)", toServed)
			} else {
				line("  durable to served (long poll woken, read, handed to the socket; below 0 when the ack reached the producer after that)", toServed)
			}
			line("  served to delivered (written, read, decoded, handed to Next)", toDelivered)
			line(fmt.Sprintf("append-to-delivery latency at %d records/s", rate), total)
		}
	}
	return nil
}

// fsyncLine prints the group commits' fdatasync histogram: the count per
// bucket, the share of fsyncs over 2 ms per 10 K records, and what they
// carried (record bytes and preallocated zeros).
func fsyncLine(out io.Writer, st spool.FsyncStats, records int) {
	if st.Count == 0 {
		return
	}
	fmt.Fprintf(out, "    fdatasyncs: %d, mean %v, max %v; by upper bound:", st.Count, (st.Sum / time.Duration(st.Count)).Round(time.Microsecond), st.Max.Round(time.Microsecond))
	var over2 uint64
	for i, n := range st.Counts {
		if i < len(spool.FsyncBuckets) {
			if n > 0 {
				fmt.Fprintf(out, " <=%v %d", spool.FsyncBuckets[i], n)
			}
			if spool.FsyncBuckets[i] > 2*time.Millisecond {
				over2 += n
			}
		} else {
			over2 += n
			if n > 0 {
				fmt.Fprintf(out, " more %d", n)
			}
		}
	}
	fmt.Fprintf(out, "\n    fdatasyncs over 2ms: %.1f per 10 K records; per fdatasync %d B of records, zeros at most %d B (%d B in all)\n",
		float64(over2)*1e4/float64(records), st.Bytes/int64(st.Count), st.MaxZeroBytes, st.ZeroBytes)
}

// produce appends count records, either as fast as possible with several
// group commits in flight, or at rate records per second.
func produce(ctx context.Context, l *spool.Log, value []byte, count, rate int, durable []time.Time) error {
	if rate > 0 {
		interval := time.Second / time.Duration(rate)
		start := time.Now()
		acks := make(chan *spool.Ack, 4096)
		done := make(chan error, 1)
		base := l.NextOffset()
		go func() {
			for a := range acks {
				off, err := a.Wait(ctx)
				if err != nil {
					done <- err
					for range acks {
					}
					return
				}
				if k := off - base; k < uint64(len(durable)) {
					durable[k] = time.Now()
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

// nodeSyncInterval is the MinSyncInterval a node's stream would use when
// configured with set: a zero one is fastmq.StreamSyncInterval, except
// under VisibleBeforeSync, where the spool makes it EarlySyncInterval.
func nodeSyncInterval(set time.Duration, visibleBeforeSync bool) time.Duration {
	if set == 0 && !visibleBeforeSync {
		return fastmq.StreamSyncInterval
	}
	return set
}
