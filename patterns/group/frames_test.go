package group_test

import (
	"context"
	"testing"
	"unsafe"

	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/socket"
)

// A fetch reply's data frames of FrameBytes arrive at the member as
// slices of the block the socket read them into (consecutive frames lie
// one frame header apart in memory): no allocation and no copy of their
// own, which a larger frame costs.
func TestFrameBytesReadInPlace(t *testing.T) {
	ctx := context.Background()
	r, err := socket.New(socket.Router, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ep, err := r.Bind("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d, err := socket.New(socket.Dealer, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Connect(ep); err != nil {
		t.Fatal(err)
	}
	if err := d.Send(ctx, socket.Msg{Frames: [][]byte{[]byte("hello")}}); err != nil {
		t.Fatal(err)
	}
	in, err := r.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	frames := [][]byte{in.Frames[0], make([]byte, 10)}
	for range 4 {
		frames = append(frames, make([]byte, wire.FrameBytes))
	}
	if err := r.Send(ctx, socket.Msg{Frames: frames}); err != nil {
		t.Fatal(err)
	}
	out, err := d.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data := out.Frames[1:]
	inPlace := 0
	for i := 1; i < len(data); i++ {
		prev := unsafe.Pointer(unsafe.SliceData(data[i-1]))
		// Between two frames of a block lies the second's header: 9
		// bytes for a long frame.
		gap := uintptr(unsafe.Pointer(unsafe.SliceData(data[i]))) - uintptr(prev) - uintptr(len(data[i-1]))
		if gap == 9 {
			inPlace++
		}
	}
	if inPlace == 0 {
		t.Fatalf("no two of %d data frames of %d bytes adjacent: each was read into a buffer of its own", len(data), wire.FrameBytes)
	}
}
