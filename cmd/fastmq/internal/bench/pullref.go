package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/fastmq/fastmq/internal/benchkit"
	"github.com/fastmq/fastmq/internal/fsutil"

	"github.com/fastmq/fastmq/internal/ctxutil"
	"github.com/fastmq/fastmq/spool"
)

// PullReference measures the least any group commit can do on this disk at
// this rate, to print beside bench pull's figures: a producer hands count
// records of size bytes at rate per second to a syncer that writes what
// came since its last fdatasync with one pwrite into a file whose blocks
// are already zero-filled and synced, then fdatasyncs it. It prints the
// append-to-durable percentiles and the fdatasync histogram. The records
// are not encoded, compressed, indexed or served: the difference to bench
// pull's append-to-durable is the spool's own.
func PullReference(ctx context.Context, out io.Writer, count, size, rate int) error {
	if count <= 0 || size <= 0 || rate <= 0 {
		return fmt.Errorf("bench: reference pipeline needs positive count, size and rate")
	}
	dir, err := os.MkdirTemp("", "fastmq-bench-pullref-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	f, err := os.OpenFile(filepath.Join(dir, "log"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	total := int64(count) * int64(size)
	zeros := make([]byte, 1<<20)
	for pos := int64(0); pos < total; pos += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), total-pos)], pos); err != nil {
			return err
		}
	}
	if err := fsutil.Datasync(f); err != nil {
		return err
	}

	appended := make([]time.Time, count)
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	produced := 0
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		cond.Broadcast()
		mu.Unlock()
	})
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		interval := time.Second / time.Duration(rate)
		start := time.Now()
		for i := 0; i < count; i++ {
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 && !ctxutil.Sleep(ctx, d) {
				return
			}
			mu.Lock()
			appended[i] = time.Now()
			produced++
			cond.Signal()
			mu.Unlock()
		}
	}()
	defer func() { cancel(); <-done }()

	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = 'a' + byte(i%26)
	}
	lat := make([]time.Duration, 0, count)
	var st fsyncHist
	var pos int64
	for synced := 0; synced < count; {
		mu.Lock()
		for produced == synced && ctx.Err() == nil {
			cond.Wait()
		}
		upto := produced
		mu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
		for n := int64(upto-synced) * int64(size); n > 0; {
			k := min(n, int64(len(buf)))
			if _, err := f.WriteAt(buf[:k], pos); err != nil {
				return err
			}
			pos, n = pos+k, n-k
		}
		t0 := time.Now()
		if err := fsutil.Datasync(f); err != nil {
			return err
		}
		now := time.Now()
		st.observe(now.Sub(t0))
		for i := synced; i < upto; i++ {
			lat = append(lat, now.Sub(appended[i]))
		}
		synced = upto
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) time.Duration { return benchkit.Percentile(lat, p) }
	fmt.Fprintf(out, "reference: bare group commit (pwrite + fdatasync of what came during the last one), %d records of %d B at %d records/s\n", count, size, rate)
	fsyncLine(out, st.stats(int64(pos)), count)
	fmt.Fprintf(out, "    append to durable: p50 %v  p90 %v  p99 %v  max %v\n", q(0.5), q(0.9), q(0.99), lat[len(lat)-1])
	return nil
}

// fsyncHist is a histogram of fdatasync durations in the spool's buckets.
type fsyncHist struct {
	counts [len(spool.FsyncBuckets) + 1]uint64
	n      uint64
	sum    time.Duration
	max    time.Duration
}

func (h *fsyncHist) observe(d time.Duration) {
	i := 0
	for i < len(spool.FsyncBuckets) && d > spool.FsyncBuckets[i] {
		i++
	}
	h.counts[i]++
	h.n++
	h.sum += d
	h.max = max(h.max, d)
}

func (h *fsyncHist) stats(bytes int64) spool.FsyncStats {
	return spool.FsyncStats{Counts: h.counts, Count: h.n, Sum: h.sum, Max: h.max, Bytes: bytes}
}
