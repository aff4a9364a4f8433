// Command spoolcmp measures the FastMQ spool and peer write-ahead logs
// (tidwall/wal, etcd's wal) on the same machine in the same run, with the
// same workloads, and prints records/s and the spool's ratio to each peer.
//
// It is in the benchcmp module so that the peers stay out of FastMQ's
// go.mod: cd benchcmp/spool && GOFLAGS=-mod=mod go run .
// go-diskqueue was not available from the module proxy and is not measured.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tidwall/wal"
	etcdwal "go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/fastmq/fastmq/spool"
)

var (
	n        = flag.Int("n", 1_000_000, "records for the group and read runs")
	size     = flag.Int("size", 100, "record size in bytes")
	batchN   = flag.Int("batch", 1024, "records per group commit")
	eachN    = flag.Int("each", 1000, "records for fsync-per-record, one writer")
	conc     = flag.Int("writers", 64, "concurrent writers for fsync-per-record")
	concN    = flag.Int("conc-each", 100, "records per concurrent writer")
	inflight = flag.Int("inflight", 16, "AppendAsync calls in flight for spool group-async")
	dirFlag  = flag.String("dir", "", "parent directory (default: temporary)")
)

type result struct {
	test, impl string
	recs       int
	d          time.Duration
}

func (r result) rate() float64 { return float64(r.recs) / r.d.Seconds() }

var results []result

func record(test, impl string, recs int, d time.Duration) {
	r := result{test, impl, recs, d}
	results = append(results, r)
	fmt.Printf("%-22s %-18s %9d records %8.3fs %12.0f records/s %8.1f MB/s\n", test, impl, recs, d.Seconds(), r.rate(), r.rate()*float64(*size)/1e6)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "spoolcmp:", err)
		os.Exit(1)
	}
}

func main() {
	flag.Parse()
	parent := *dirFlag
	if parent == "" {
		var err error
		parent, err = os.MkdirTemp("", "spoolcmp")
		must(err)
		defer os.RemoveAll(parent)
	}
	val := make([]byte, *size)
	for i := range val {
		val[i] = byte('a' + i%26)
	}
	dir := func(name string) string {
		d := filepath.Join(parent, name)
		os.RemoveAll(d)
		return d
	}
	ctx := context.Background()
	rounds := *n / *batchN

	// ---- FastMQ spool ----
	recs := make([]spool.Record, *batchN)
	for i := range recs {
		recs[i].Value = val
	}
	l, err := spool.Open(spool.Config{Dir: dir("spool-group")})
	must(err)
	t0 := time.Now()
	for i := 0; i < rounds; i++ {
		_, err := l.Append(ctx, recs...)
		must(err)
	}
	record("group", "spool", rounds**batchN, time.Since(t0))
	must(l.Close())

	l, err = spool.Open(spool.Config{Dir: dir("spool-async")})
	must(err)
	t0 = time.Now()
	var q []*spool.Ack
	for i := 0; i < rounds; i++ {
		if len(q) == *inflight {
			_, err := q[0].Wait(ctx)
			must(err)
			q = q[1:]
		}
		a, err := l.AppendAsync(ctx, recs...)
		must(err)
		q = append(q, a)
	}
	for _, a := range q {
		_, err := a.Wait(ctx)
		must(err)
	}
	record("group", "spool-async", rounds**batchN, time.Since(t0))
	rd, err := l.NewReader(0)
	must(err)
	total := int(l.NextOffset())
	t0 = time.Now()
	for i := 0; i < total; i++ {
		_, err := rd.Next(ctx)
		must(err)
	}
	record("read", "spool", total, time.Since(t0))
	must(l.Close())

	l, err = spool.Open(spool.Config{Dir: dir("spool-each"), Sync: spool.SyncEach})
	must(err)
	t0 = time.Now()
	for i := 0; i < *eachN; i++ {
		_, err := l.Append(ctx, spool.Record{Value: val})
		must(err)
	}
	record("each-1", "spool", *eachN, time.Since(t0))
	must(l.Close())

	l, err = spool.Open(spool.Config{Dir: dir("spool-conc"), Sync: spool.SyncEach})
	must(err)
	t0 = time.Now()
	var wg sync.WaitGroup
	for w := 0; w < *conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < *concN; i++ {
				_, err := l.Append(ctx, spool.Record{Value: val})
				must(err)
			}
		}()
	}
	wg.Wait()
	record(fmt.Sprintf("each-%d", *conc), "spool", *conc**concN, time.Since(t0))
	must(l.Close())

	// ---- tidwall/wal ----
	tw, err := wal.Open(dir("tidwall-group"), &wal.Options{LogFormat: wal.Binary, NoCopy: true})
	must(err)
	t0 = time.Now()
	idx := uint64(1)
	var b wal.Batch
	for i := 0; i < rounds; i++ {
		b.Clear()
		for j := 0; j < *batchN; j++ {
			b.Write(idx, val)
			idx++
		}
		must(tw.WriteBatch(&b)) // one fsync per batch
	}
	record("group", "tidwall/wal", rounds**batchN, time.Since(t0))
	t0 = time.Now()
	for i := uint64(1); i < idx; i++ {
		_, err := tw.Read(i)
		must(err)
	}
	record("read", "tidwall/wal", int(idx-1), time.Since(t0))
	must(tw.Close())

	tw, err = wal.Open(dir("tidwall-each"), &wal.Options{LogFormat: wal.Binary})
	must(err)
	t0 = time.Now()
	for i := 1; i <= *eachN; i++ {
		must(tw.Write(uint64(i), val))
	}
	record("each-1", "tidwall/wal", *eachN, time.Since(t0))
	must(tw.Close())

	tw, err = wal.Open(dir("tidwall-conc"), &wal.Options{LogFormat: wal.Binary})
	must(err)
	var mu sync.Mutex
	idx = 1
	t0 = time.Now()
	for w := 0; w < *conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < *concN; i++ {
				mu.Lock()
				err := tw.Write(idx, val)
				idx++
				mu.Unlock()
				must(err)
			}
		}()
	}
	wg.Wait()
	record(fmt.Sprintf("each-%d", *conc), "tidwall/wal", *conc**concN, time.Since(t0))
	must(tw.Close())

	// ---- etcd wal ----
	lg := zap.NewNop()
	ew, err := etcdwal.Create(lg, dir("etcd-group"), nil)
	must(err)
	t0 = time.Now()
	ei := uint64(1)
	term := uint64(1)
	ents := make([]*raftpb.Entry, *batchN)
	for i := 0; i < rounds; i++ {
		for j := range ents {
			ix := ei
			ents[j] = &raftpb.Entry{Term: &term, Index: &ix, Data: val}
			ei++
		}
		must(ew.Save(&raftpb.HardState{}, ents)) // one fsync per Save with entries
	}
	record("group", "etcd wal", rounds**batchN, time.Since(t0))
	must(ew.Close())
	er, err := etcdwal.OpenForRead(lg, filepath.Join(parent, "etcd-group"), nil)
	must(err)
	t0 = time.Now()
	_, _, all, err := er.ReadAll()
	must(err)
	record("read", "etcd wal", len(all), time.Since(t0))
	er.Close() // a read-only WAL reports EINVAL on Close (fsync of a read-only file)

	ew, err = etcdwal.Create(lg, dir("etcd-each"), nil)
	if err != nil {
		must(fmt.Errorf("etcd create: %w", err))
	}
	t0 = time.Now()
	for i := 1; i <= *eachN; i++ {
		ix := uint64(i)
		if err := ew.Save(&raftpb.HardState{}, []*raftpb.Entry{{Term: &term, Index: &ix, Data: val}}); err != nil {
			must(fmt.Errorf("etcd save %d: %w", i, err))
		}
	}
	record("each-1", "etcd wal", *eachN, time.Since(t0))
	must(ew.Close())

	fmt.Println()
	fmt.Println("ratios (spool / peer, same test, same run):")
	get := func(test, impl string) float64 {
		for _, r := range results {
			if r.test == test && r.impl == impl {
				return r.rate()
			}
		}
		return 0
	}
	for _, test := range []string{"group", "read", "each-1", fmt.Sprintf("each-%d", *conc)} {
		for _, peer := range []string{"tidwall/wal", "etcd wal"} {
			p := get(test, peer)
			if p == 0 {
				continue
			}
			fmt.Printf("  %-10s spool/%s = %.2fx", test, peer, get(test, "spool")/p)
			if test == "group" {
				fmt.Printf("   spool-async/%s = %.2fx", peer, get(test, "spool-async")/p)
			}
			fmt.Println()
		}
	}
}
