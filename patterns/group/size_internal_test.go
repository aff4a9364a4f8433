package group

import (
	"testing"
	"unsafe"
)

// A chunk of messages fills a size class under 32 KiB exactly (see
// msgChunk): a field added to Message makes it a larger class, or a
// large allocation.
func TestMessageChunkSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes differ on 32-bit platforms")
	}
	if n := msgChunk * unsafe.Sizeof(Message{}); n != 28<<10 {
		t.Fatalf("a chunk of %d messages takes %d bytes, want 28 KiB", msgChunk, n)
	}
}
