package zmtp

import (
	"encoding/binary"
	"net"
	"runtime"
	"testing"
)

// TestAnnouncedFrameAllocatesAsItArrives: 20 readers each get the header
// of a 60 MiB frame and 1 KiB of its body; together they pin at most
// 20 x 256 KiB (one chunk each, and the read block), where a 1 MiB chunk
// allocated up front pinned over 20 MiB.
func TestAnnouncedFrameAllocatesAsItArrives(t *testing.T) {
	const readers = 20
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := int64(ms.HeapInuse)
	var ends []net.Conn
	done := make(chan error, readers)
	for range readers {
		a, b := net.Pipe()
		ends = append(ends, a, b)
		r := NewReader(b, 0)
		r.MaxMsgSize = 64 << 20
		go func() {
			_, _, err := r.Next(nil)
			done <- err
		}()
		hdr := []byte{FlagLong, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint64(hdr[1:], 60<<20)
		// net.Pipe's Write returns once the reader has read it all.
		if _, err := a.Write(append(hdr, make([]byte, 1<<10)...)); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	grew := int64(ms.HeapInuse) - before
	for _, c := range ends {
		c.Close()
	}
	for range readers {
		if err := <-done; err == nil {
			t.Fatal("a truncated frame decoded")
		}
	}
	t.Logf("heap grew %d KiB for %d readers of a 60 MiB frame with 1 KiB sent", grew>>10, readers)
	if grew > readers*256<<10 {
		t.Fatalf("heap grew %d bytes", grew)
	}
}
