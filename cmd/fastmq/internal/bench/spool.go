package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fastmq/fastmq/spool"
)

// SpoolOptions are the flags of bench spool.
type SpoolOptions struct {
	Dir       string
	Count     int
	Size      int
	Batch     int
	Inflight  int
	EachCount int
	Writers   int
	Codec     string
	JSON      bool
}

type spoolBenchResult struct {
	Name       string  `json:"name"`
	Meaning    string  `json:"meaning"`
	Records    int     `json:"records"`
	Seconds    float64 `json:"seconds"`
	RecordsSec float64 `json:"records_per_sec"`
	MBSec      float64 `json:"mb_per_sec"`
}

// Spool runs the spool benchmarks as o says and prints their figures to
// out.
func Spool(ctx context.Context, out io.Writer, o *SpoolOptions) error {
	codec, err := spool.ParseCodec(o.Codec)
	if err != nil {
		return err
	}
	if o.Count <= 0 || o.Size < 0 || o.Batch <= 0 || o.Inflight <= 0 || o.EachCount <= 0 || o.Writers <= 0 {
		return fmt.Errorf("counts must be positive")
	}
	parent := o.Dir
	if parent == "" {
		if parent, err = os.MkdirTemp("", "fastmq-bench-spool"); err != nil {
			return err
		}
		defer os.RemoveAll(parent)
	}
	value := make([]byte, o.Size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	batch := make([]spool.Record, o.Batch)
	for i := range batch {
		batch[i].Value = value
	}
	report := func(name, meaning string, n int, d time.Duration) {
		r := spoolBenchResult{Name: name, Meaning: meaning, Records: n, Seconds: d.Seconds(),
			RecordsSec: float64(n) / d.Seconds(), MBSec: float64(n) * float64(o.Size) / d.Seconds() / 1e6}
		if o.JSON {
			json.NewEncoder(out).Encode(r)
			return
		}
		fmt.Fprintf(out, "%-12s %10d records %8.3fs %12.0f records/s %9.1f MB/s  (%s)\n",
			r.Name, r.Records, r.Seconds, r.RecordsSec, r.MBSec, r.Meaning)
	}
	open := func(name string, sp spool.SyncPolicy) (*spool.Log, error) {
		dir := filepath.Join(parent, name)
		os.RemoveAll(dir)
		return spool.Open(spool.Config{Dir: dir, Sync: sp, Codec: codec})
	}
	rounds := (o.Count + o.Batch - 1) / o.Batch

	// group: blocking appends of whole batches.
	l, err := open("group", spool.SyncGroup)
	if err != nil {
		return err
	}
	start := time.Now()
	for i := 0; i < rounds && ctx.Err() == nil; i++ {
		if _, err := l.Append(ctx, batch...); err != nil {
			l.Close()
			return err
		}
	}
	report("group", fmt.Sprintf("1 appender, %d records per Append, returns after fsync", o.Batch), rounds*o.Batch, time.Since(start))
	if err := l.Close(); err != nil {
		return err
	}

	// group-async: pipelined batches.
	l, err = open("group-async", spool.SyncGroup)
	if err != nil {
		return err
	}
	defer l.Close()
	start = time.Now()
	var pending []*spool.Ack
	for i := 0; i < rounds && ctx.Err() == nil; i++ {
		if len(pending) == o.Inflight {
			if _, err := pending[0].Wait(ctx); err != nil {
				return err
			}
			pending = pending[1:]
		}
		a, err := l.AppendAsync(ctx, batch...)
		if err != nil {
			return err
		}
		pending = append(pending, a)
	}
	for _, a := range pending {
		if _, err := a.Wait(ctx); err != nil {
			return err
		}
	}
	report("group-async", fmt.Sprintf("1 appender, %d records per AppendAsync, %d in flight, acknowledged after fsync", o.Batch, o.Inflight),
		rounds*o.Batch, time.Since(start))

	// read: sequential, warm cache.
	r, err := l.NewReader(0)
	if err != nil {
		return err
	}
	total := int(l.NextOffset())
	start = time.Now()
	for i := 0; i < total; i++ {
		if _, err := r.Next(ctx); err != nil {
			return err
		}
	}
	report("read", "Reader.Next over the group-async log, warm page cache", total, time.Since(start))
	r.Close()

	// each: one record per call, fsync before return.
	for _, writers := range []int{1, o.Writers} {
		le, err := open(fmt.Sprintf("each-%d", writers), spool.SyncEach)
		if err != nil {
			return err
		}
		var g errgroup.Group
		var mu sync.Mutex
		n := 0
		start = time.Now()
		for w := 0; w < writers; w++ {
			g.Go(func() error {
				per := o.EachCount
				if writers > 1 {
					per = max(o.EachCount/writers*4, 1) // keep the run short
				}
				for i := 0; i < per && ctx.Err() == nil; i++ {
					if _, err := le.Append(ctx, spool.Record{Value: value}); err != nil {
						return err
					}
					mu.Lock()
					n++
					mu.Unlock()
				}
				return nil
			})
		}
		err = g.Wait()
		d := time.Since(start)
		if cerr := le.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		report(fmt.Sprintf("each-%d", writers), fmt.Sprintf("%d concurrent appenders, 1 record per Append, fsync before it returns", writers), n, d)
	}
	return ctx.Err()
}
