package socket_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// BenchmarkCeiling is the least any message engine must do to move b.N
// messages one way in one process, as a ceiling for BenchmarkCompare: the
// sender allocates each message (as benchStream does), copies it behind a
// length prefix into a 64 KiB buffer and writes full buffers; the receiver
// reads into fresh 64 KiB blocks and slices the messages out. There are no
// queues, no routing and no hand-offs between goroutines.
//
//	go test ./socket/ -run '^$' -bench 'Ceiling|Compare/pushpull' -benchtime 2s
func BenchmarkCeiling(b *testing.B) {
	for _, transport := range []string{"tcp", "ipc"} {
		for _, size := range []int{100, 1024} {
			b.Run(fmt.Sprintf("%s/%dB", transport, size), func(b *testing.B) { benchCeiling(b, transport, size) })
		}
	}
}

func benchCeiling(b *testing.B, transport string, size int) {
	network, addr := "tcp", "127.0.0.1:0"
	if transport == "ipc" {
		network = "unix"
		addr = strings.TrimPrefix(benchEP(b, "ipc"), "ipc://")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int, 1)
	go func() {
		n := 0
		defer func() { got <- n }()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var blk, last []byte
		r, w := 0, 0
		for n < b.N {
			if len(blk)-w < 4+size {
				nb := make([]byte, 64<<10)
				w = copy(nb, blk[r:w])
				r, blk = 0, nb
			}
			k, err := c.Read(blk[w:])
			if err != nil {
				return
			}
			w += k
			for w-r >= 4 {
				l := int(binary.BigEndian.Uint32(blk[r:]))
				if w-r < 4+l {
					break
				}
				last = blk[r+4 : r+4+l : r+4+l]
				r += 4 + l
				n++
			}
		}
		_ = last
	}()
	c, err := net.Dial(network, ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	payload := bytes.Repeat([]byte{'x'}, size)
	buf := make([]byte, 0, 64<<10)
	for range b.N {
		m := bytes.Clone(payload)
		if len(buf)+4+len(m) > cap(buf) {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
			buf = buf[:0]
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(m)))
		buf = append(buf, m...)
	}
	if _, err := c.Write(buf); err != nil {
		b.Fatal(err)
	}
	if n := <-got; n != b.N {
		b.Fatalf("received %d of %d", n, b.N)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
