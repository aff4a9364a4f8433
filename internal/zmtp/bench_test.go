package zmtp

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// BenchmarkWriteMessage measures encoding one single-frame message into
// the buffer (flushed to io.Discard as it fills).
func BenchmarkWriteMessage(b *testing.B) {
	for _, size := range []int{100, 1024} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			w := NewWriter(io.Discard, 0)
			frames := [][]byte{bytes.Repeat([]byte{'x'}, size)}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := w.WriteMessage(frames); err != nil {
					b.Fatal(err)
				}
			}
			_ = w.Flush()
		})
	}
}

// BenchmarkReaderNext measures decoding single-frame messages from a
// stream held in memory, with several block sizes.
func BenchmarkReaderNext(b *testing.B) {
	for _, block := range []int{16 << 10, 32 << 10, 64 << 10} {
		for _, size := range []int{100, 1024} {
			b.Run(fmt.Sprintf("%dB/block=%dK", size, block>>10), func(b *testing.B) {
				benchReaderNext(b, size, block)
			})
		}
	}
}

func benchReaderNext(b *testing.B, size, block int) {
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	const n = 4096
	for range n {
		_ = w.WriteMessage([][]byte{bytes.Repeat([]byte{'x'}, size)})
	}
	_ = w.Flush()
	stream := buf.Bytes()
	src := bytes.NewReader(stream)
	r := NewReader(src, block)
	frames := make([][]byte, 0, 4)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == n {
			src.Reset(stream)
			i = 0
		}
		f, _, err := r.Next(frames)
		if err != nil || len(f) != 1 {
			b.Fatal(err)
		}
		i++
	}
}
