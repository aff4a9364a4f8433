package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/fastmq/fastmq/spool"
)

type spoolBenchOpts struct {
	dir      string
	count    int
	size     int
	batch    int
	inflight int
	eachN    int
	writers  int
	codec    string
	json     bool
}

type spoolBenchResult struct {
	Name       string  `json:"name"`
	Meaning    string  `json:"meaning"`
	Records    int     `json:"records"`
	Seconds    float64 `json:"seconds"`
	RecordsSec float64 `json:"records_per_sec"`
	MBSec      float64 `json:"mb_per_sec"`
}

func init() {
	o := &spoolBenchOpts{}
	cmd := &cobra.Command{
		Use:   "spool",
		Short: "Append and read throughput of the spool",
		Long: "Measures the spool on this machine's disk, each run in a fresh directory:\n" +
			"  group          one goroutine, Append of --batch records per call, group commit; each call returns after its fsync\n" +
			"  group-async    one goroutine, AppendAsync of --batch records per call with --inflight calls outstanding; counted when acknowledged (after fsync)\n" +
			"  each-1         one goroutine, Append of one record per call, fsync before each returns\n" +
			"  each-N         --writers goroutines, Append of one record per call, fsync before each returns (concurrent calls share fsyncs)\n" +
			"  read           sequential read with a Reader of the records written by group-async (warm page cache)\n" +
			"Records are --size bytes of text. Prints records/s and MB/s of record values.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSpoolBench(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "parent `directory` for the test spools (default: a temporary directory, removed afterwards)")
	f.IntVar(&o.count, "count", 1_000_000, "records for the group and read runs")
	f.IntVar(&o.size, "size", 100, "record value size in `BYTES`")
	f.IntVar(&o.batch, "batch", 1024, "records per Append call in the group runs")
	f.IntVar(&o.inflight, "inflight", 16, "outstanding AppendAsync calls in group-async")
	f.IntVar(&o.eachN, "each-count", 2000, "records per writer in the each runs")
	f.IntVar(&o.writers, "writers", 64, "concurrent writers in each-N")
	f.StringVar(&o.codec, "codec", "none", "batch compression: none, s2 or zstd")
	f.BoolVar(&o.json, "json", false, "print results as JSON lines")
	benchCmd.AddCommand(cmd)
}

func runSpoolBench(ctx context.Context, out io.Writer, o *spoolBenchOpts) error {
	codec, err := spool.ParseCodec(o.codec)
	if err != nil {
		return err
	}
	if o.count <= 0 || o.size < 0 || o.batch <= 0 || o.inflight <= 0 || o.eachN <= 0 || o.writers <= 0 {
		return fmt.Errorf("counts must be positive")
	}
	parent := o.dir
	if parent == "" {
		if parent, err = os.MkdirTemp("", "fastmq-bench-spool"); err != nil {
			return err
		}
		defer os.RemoveAll(parent)
	}
	value := make([]byte, o.size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	batch := make([]spool.Record, o.batch)
	for i := range batch {
		batch[i].Value = value
	}
	report := func(name, meaning string, n int, d time.Duration) {
		r := spoolBenchResult{Name: name, Meaning: meaning, Records: n, Seconds: d.Seconds(),
			RecordsSec: float64(n) / d.Seconds(), MBSec: float64(n) * float64(o.size) / d.Seconds() / 1e6}
		if o.json {
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
	rounds := (o.count + o.batch - 1) / o.batch

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
	report("group", fmt.Sprintf("1 appender, %d records per Append, returns after fsync", o.batch), rounds*o.batch, time.Since(start))
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
		if len(pending) == o.inflight {
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
	report("group-async", fmt.Sprintf("1 appender, %d records per AppendAsync, %d in flight, acknowledged after fsync", o.batch, o.inflight),
		rounds*o.batch, time.Since(start))

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
	for _, writers := range []int{1, o.writers} {
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
				per := o.eachN
				if writers > 1 {
					per = max(o.eachN/writers*4, 1) // keep the run short
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
