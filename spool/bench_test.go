package spool

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

func benchRecords(n, size int) []Record {
	recs := make([]Record, n)
	v := make([]byte, size)
	for i := range v {
		v[i] = byte('a' + i%26)
	}
	for i := range recs {
		recs[i].Value = v
	}
	return recs
}

// BenchmarkAppendGroup appends 100-byte records in calls of 1024 records
// each, one appender, group commit; every call returns after its fsync.
func BenchmarkAppendGroup(b *testing.B) {
	for _, c := range []Codec{CodecNone, CodecS2, CodecZstd} {
		for _, size := range []int{100, 1000} {
			b.Run(fmt.Sprintf("%s/size=%d", c, size), func(b *testing.B) { benchAppendGroup(b, c, size) })
		}
	}
}

func benchAppendGroup(b *testing.B, c Codec, size int) {
	{
		{
			l, err := Open(Config{Dir: b.TempDir(), Codec: c})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			recs := benchRecords(1024, size)
			b.ReportAllocs()
			b.SetBytes(int64(size) * 1024)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.Append(context.Background(), recs...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*1024)/b.Elapsed().Seconds(), "records/s")
		}
	}
}

// BenchmarkDecodeBatches decodes stored batches of 1024 records of 100 bytes.
func BenchmarkDecodeBatches(b *testing.B) {
	for _, c := range []Codec{CodecNone, CodecS2, CodecZstd} {
		b.Run(c.String(), func(b *testing.B) {
			l := benchFilled(b, c, 1)
			data, _, err := l.ReadRaw(0, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(1024 * 100)
			for i := 0; i < b.N; i++ {
				if err := DecodeBatches(data, 0, 0, func(Record) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendGroupPipelined: one goroutine appends 100-byte records in
// calls of 1024 with AppendAsync, keeping up to 4 calls in flight; group
// commit; a call counts when its Ack (after fsync) completes.
func BenchmarkAppendGroupPipelined(b *testing.B) {
	l, err := Open(Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	recs := benchRecords(1024, 100)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(100 * 1024)
	b.ResetTimer()
	var inflight []*Ack
	for i := 0; i < b.N; i++ {
		if len(inflight) == benchInflight {
			if _, err := inflight[0].Wait(ctx); err != nil {
				b.Fatal(err)
			}
			inflight = inflight[1:]
		}
		a, err := l.AppendAsync(ctx, recs...)
		if err != nil {
			b.Fatal(err)
		}
		inflight = append(inflight, a)
	}
	for _, a := range inflight {
		if _, err := a.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*1024)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkAppendConcurrent: writers goroutines each append one 100-byte
// record per call; SyncEach (every call durable on return) or SyncGroup.
func BenchmarkAppendConcurrent(b *testing.B) {
	for _, p := range []SyncPolicy{SyncEach, SyncGroup} {
		for _, writers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/writers=%d", p, writers), func(b *testing.B) {
				l, err := Open(Config{Dir: b.TempDir(), Sync: p})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				rec := benchRecords(1, 100)[0]
				b.ReportAllocs()
				b.SetBytes(100)
				b.ResetTimer()
				var wg sync.WaitGroup
				per := (b.N + writers - 1) / writers
				for w := 0; w < writers; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; i < per; i++ {
							if _, err := l.Append(context.Background(), rec); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(per*writers)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// benchFilled opens a Log (closed when b ends) holding at least n records of
// 100 bytes, appended 1024 at a time.
func benchFilled(b *testing.B, c Codec, n int) *Log {
	l, err := Open(Config{Dir: b.TempDir(), Codec: c, Sync: SyncNone})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	recs := benchRecords(1024, 100)
	for l.NextOffset() < uint64(n) {
		if _, err := l.Append(context.Background(), recs...); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

// BenchmarkRead reads 100-byte records sequentially with a Reader (warm cache).
func BenchmarkRead(b *testing.B) {
	for _, c := range []Codec{CodecNone, CodecS2, CodecZstd} {
		b.Run(c.String(), func(b *testing.B) {
			l := benchFilled(b, c, b.N)
			r, _ := l.NewReader(0)
			b.ReportAllocs()
			b.SetBytes(100)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := r.Next(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

var benchInflight = 16

// BenchmarkAppendDedup: one appender keeps 64 single-record appends in
// flight, each with a new message id or the next sequence of one producer
// (group commit), against records without headers.
func BenchmarkAppendDedup(b *testing.B) {
	for _, kind := range []string{"plain", "msgid", "producer"} {
		b.Run(kind, func(b *testing.B) {
			l, err := Open(Config{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ctx := context.Background()
			v := benchRecords(1, 100)[0].Value
			b.ReportAllocs()
			b.SetBytes(100)
			b.ResetTimer()
			var inflight []*Ack
			for i := 0; i < b.N; i++ {
				rec := Record{Value: v}
				switch kind {
				case "msgid":
					rec.Headers = []Header{MsgID(strconv.Itoa(i))}
				case "producer":
					rec.Headers = []Header{ProducerSeq("bench", uint64(i+1))}
				}
				if len(inflight) == 64 {
					if _, err := inflight[0].Wait(ctx); err != nil {
						b.Fatal(err)
					}
					inflight = inflight[1:]
				}
				a, err := l.AppendAsync(ctx, rec)
				if err != nil {
					b.Fatal(err)
				}
				inflight = append(inflight, a)
			}
			for _, a := range inflight {
				if _, err := a.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkAckLatency appends single 100-byte records at a steady 10 K a
// second (group commit) and reports the time from AppendAsync to its
// Ack.Wait returning, p50 and p99 in µs, and the fsyncs a second: with the
// fsyncs back to back (as a node's streams), and paced 500 µs apart
// (MinSyncInterval), which costs up to that much latency for fewer
// fsyncs. Each iteration is one record, so ns/op is the pacing (100 µs).
func BenchmarkAckLatency(b *testing.B) {
	b.Run("back-to-back", func(b *testing.B) { benchAckLatency(b, 0) })
	b.Run("min-sync=500µs", func(b *testing.B) { benchAckLatency(b, 500*time.Microsecond) })
}

func benchAckLatency(b *testing.B, minSync time.Duration) {
	l, err := Open(Config{Dir: b.TempDir(), GroupInterval: -1, MinSyncInterval: minSync})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	value := benchRecords(1, 100)[0].Value
	type sent struct {
		a  *Ack
		at time.Time
	}
	acks := make(chan sent, 1024)
	lat := make([]time.Duration, 0, b.N)
	done := make(chan error, 1)
	go func() {
		for s := range acks {
			if _, err := s.a.Wait(ctx); err != nil {
				done <- err
				for range acks {
				}
				return
			}
			lat = append(lat, time.Since(s.at))
		}
		done <- nil
	}()
	const interval = 100 * time.Microsecond
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		at := time.Now()
		a, err := l.AppendAsync(ctx, Record{Value: value, Time: at})
		if err != nil {
			close(acks)
			<-done
			b.Fatal(err)
		}
		acks <- sent{a, at}
	}
	close(acks)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(l.FsyncStats().Count)/b.Elapsed().Seconds(), "fsyncs/s")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
