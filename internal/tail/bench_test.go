package tail

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkRead measures reading a pre-written file: each iteration follows
// a fresh file of benchLines lines until all are delivered.
func BenchmarkRead(b *testing.B) {
	const benchLines = 100_000
	for _, size := range []int{64, 512} {
		b.Run(fmt.Sprintf("line=%dB", size), func(b *testing.B) {
			dir := b.TempDir()
			p := filepath.Join(dir, "app.log")
			line := strings.Repeat("x", size-1) + "\n"
			data := []byte(strings.Repeat(line, benchLines))
			if err := os.WriteFile(p, data, 0o644); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				tl, err := New(Config{Paths: []string{p}})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				n := 0
				tl.Run(ctx, func(lines []Line) error {
					n += len(lines)
					if n >= benchLines {
						cancel()
					}
					return nil
				})
				cancel()
				tl.Close()
				if n != benchLines {
					b.Fatalf("read %d lines, want %d", n, benchLines)
				}
			}
			b.ReportMetric(float64(b.N*benchLines)/time.Since(start).Seconds(), "lines/s")
		})
	}
}
