package fastmq_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/spool"
)

// BenchmarkPublish measures single-record publishing of 100 B values on one
// node: Publish waits for each record to be durable (an fsync each, shared
// only with concurrent callers); PublishAsync keeps them in flight and waits
// for the last, so group commit takes many records per fsync.
func BenchmarkPublish(b *testing.B) {
	value := make([]byte, 100)
	for _, mode := range []string{"sync", "async"} {
		b.Run(mode, func(b *testing.B) {
			node, err := fastmq.New(fastmq.Config{Name: "bench", DataDir: filepath.Join(b.TempDir(), "n")})
			if err != nil {
				b.Fatal(err)
			}
			defer node.Close()
			ctx := context.Background()
			if _, err := node.Stream("bench"); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			var last *spool.Ack
			for i := 0; i < b.N; i++ {
				if mode == "sync" {
					if _, err := node.Publish(ctx, "bench", value); err != nil {
						b.Fatal(err)
					}
					continue
				}
				if last, err = node.PublishAsync(ctx, "bench", value); err != nil {
					b.Fatal(err)
				}
			}
			if last != nil {
				if _, err := last.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
