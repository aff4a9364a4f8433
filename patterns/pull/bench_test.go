package pull_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// benchPipe opens a spool with group commit and codec, serves it over tcp
// loopback and starts a consumer of it (stream "s", publisher "p") with
// ccfg's tuning. Everything is closed when b's run ends.
func benchPipe(b *testing.B, codec spool.Codec, ccfg pull.ConsumerConfig) (*spool.Log, *pull.Consumer) {
	b.Helper()
	l, err := spool.Open(spool.Config{Dir: b.TempDir(), Sync: spool.SyncGroup, Codec: codec})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	srv, err := pull.NewServer(pull.ServerConfig{Lookup: func(string) (*spool.Log, bool) { return l, true }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	ccfg.Stream = "s"
	ccfg.Publishers = map[string]string{"p": srv.Endpoints()[0]}
	c, err := pull.NewConsumer(ccfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return l, c
}

// BenchmarkEndToEnd measures one publisher to one consumer over tcp
// loopback: records are appended with group commit while the consumer pulls
// them; b.N records of 100 bytes pass end to end.
func BenchmarkEndToEnd(b *testing.B) {
	for _, codec := range []spool.Codec{spool.CodecNone, spool.CodecS2} {
		b.Run(codec.String(), func(b *testing.B) {
			l, c := benchPipe(b, codec, pull.ConsumerConfig{MaxBytes: 4 << 20, Buffer: 16})
			value := make([]byte, 100)
			for i := range value {
				value[i] = 'a' + byte(i%26)
			}
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			b.ResetTimer()
			errc := make(chan error, 1)
			go func() {
				// One producer keeps up to 4 group-committed appends of
				// 1024 records in flight, as a publisher with several
				// writers would; each is acknowledged after its fsync.
				const inflight = 4
				bufs := make([][]spool.Record, inflight)
				acks := make([]*spool.Ack, inflight)
				for i := range bufs {
					bufs[i] = make([]spool.Record, 1024)
				}
				for left, slot := b.N, 0; left > 0; slot = (slot + 1) % inflight {
					if acks[slot] != nil {
						if _, err := acks[slot].Wait(context.Background()); err != nil {
							errc <- err
							return
						}
					}
					k := min(left, 1024)
					recs := bufs[slot][:k]
					for i := range recs {
						recs[i] = spool.Record{Value: value}
					}
					a, err := l.AppendAsync(context.Background(), recs...)
					if err != nil {
						errc <- err
						return
					}
					acks[slot] = a
					left -= k
				}
				for _, a := range acks {
					if a != nil {
						if _, err := a.Wait(context.Background()); err != nil {
							errc <- err
							return
						}
					}
				}
				errc <- nil
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			for i := 0; i < b.N; i++ {
				m, err := c.Next(ctx)
				if err != nil {
					b.Fatal(err)
				}
				c.Ack(m)
			}
			b.StopTimer()
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkLatency measures append-to-delivery latency at a steady 10 K
// records/s (one record every 100µs, each appended with group commit) and
// reports p50 and p99. b.N is the number of records.
func BenchmarkLatency(b *testing.B) {
	l, c := benchPipe(b, spool.CodecNone, pull.ConsumerConfig{MaxWait: 10 * time.Second})
	n := max(b.N, 100)
	lat := make([]time.Duration, 0, n)
	done := make(chan error, 1)
	b.ResetTimer()
	go func() {
		tick := time.NewTicker(100 * time.Microsecond)
		defer tick.Stop()
		for i := 0; i < n; i++ {
			<-tick.C
			// Appends are not awaited one by one: the producer hands each
			// record to the spool as the application would, from its own
			// goroutine, and group commit acknowledges them.
			go func(i int) {
				_, err := l.Append(context.Background(), spool.Record{Value: []byte(fmt.Sprint(i)), Time: time.Now()})
				if err != nil {
					select {
					case done <- err:
					default:
					}
				}
			}(i)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := 0; i < n; i++ {
		m, err := c.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(m.Time))
	}
	b.StopTimer()
	select {
	case err := <-done:
		b.Fatal(err)
	default:
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
