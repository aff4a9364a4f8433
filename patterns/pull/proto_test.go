package pull

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/uuid"
)

func TestRequestRoundTrip(t *testing.T) {
	cases := []Request{
		{Version: ProtocolVersion, Op: OpFetch, ID: 1, Offset: 0, MaxBytes: 1 << 20, MaxWaitMillis: 2000, Stream: "a"},
		{Version: 1, Op: OpMeta, ID: 1<<32 - 1, Offset: 1<<64 - 1, Stream: "access-log"},
		{Version: 2, Op: OpSeekTime, ID: 7, Offset: 1700000000000000000, Stream: string(bytes.Repeat([]byte("s"), MaxStreamName))},
		{Version: 2, Op: OpFetch, ID: 8, Offset: 990, Stream: "s", LogID: uuid.New(), Epoch: 3},
		{Version: 2, Op: OpFetch, ID: 9, Offset: 5, Stream: "s", Epoch: NoEpoch},
	}
	for _, want := range cases {
		got, err := DecodeRequest(EncodeRequest(&want))
		if err != nil {
			t.Fatalf("decode %+v: %v", want, err)
		}
		if got != want {
			t.Fatalf("round trip: got %+v, want %+v", got, want)
		}
	}
}

func TestReplyRoundTrip(t *testing.T) {
	for _, want := range []Reply{
		{Version: 1, Status: StatusOutOfRange, ID: 9, Next: 10, Oldest: 5, High: 99, Data: []byte("below retention")},
		{Version: 2, Status: StatusDiverged, ID: 9, Next: 990, Oldest: 0, High: 995, Data: []byte("lost"), LogID: uuid.New(), Epoch: 1},
	} {
		got, err := DecodeReply(EncodeReply(&want))
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != want.Status || got.ID != want.ID || got.Next != want.Next || got.Oldest != want.Oldest || got.High != want.High ||
			!bytes.Equal(got.Data, want.Data) || got.LogID != want.LogID || got.Epoch != want.Epoch {
			t.Fatalf("round trip: got %+v, want %+v", got, want)
		}
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	good := EncodeRequest(&Request{Op: OpFetch, ID: 1, Stream: "s"})
	badVersion := append([]byte(nil), good[0]...)
	badVersion[0] = 9
	badOp := append([]byte(nil), good[0]...)
	badOp[1] = 0
	cases := map[string][][]byte{
		"no frames":       nil,
		"one frame":       good[:1],
		"three frames":    {good[0], good[1], {}},
		"short header":    {good[0][:21], good[1]},
		"long header":     {append(append([]byte(nil), good[0]...), 0), good[1]},
		"bad version":     {badVersion, good[1]},
		"unknown op":      {badOp, good[1]},
		"empty stream":    {good[0], {}},
		"stream too long": {good[0], bytes.Repeat([]byte("x"), MaxStreamName+1)},
	}
	for name, frames := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeRequest(frames); !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
	rep := EncodeReply(&Reply{Status: StatusOK})
	rep[0][1] = 200
	if _, err := DecodeReply(rep); !errors.Is(err, ErrMalformed) {
		t.Fatalf("unknown status: got %v, want ErrMalformed", err)
	}
}

// TestVersion2StatusesOnlyInVersion2 checks that the gap, damaged, other
// log and diverged
// statuses decode in version 2 replies and are malformed in version 1.
func TestVersion2StatusesOnlyInVersion2(t *testing.T) {
	for _, st := range []Status{StatusGap, StatusDamaged, StatusOtherLog, StatusDiverged} {
		r, err := DecodeReply(EncodeReply(&Reply{Status: st, Next: 9}))
		if err != nil || r.Status != st || r.Version != ProtocolVersion {
			t.Fatalf("%v in version %d: %+v, %v", st, ProtocolVersion, r, err)
		}
		if _, err := DecodeReply(EncodeReply(&Reply{Version: 1, Status: st})); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%v in version 1: got %v, want ErrMalformed", st, err)
		}
	}
}

// FuzzDecodeRequest checks that no input panics the request decoder and
// that whatever it accepts encodes back to the same frames.
func FuzzDecodeRequest(f *testing.F) {
	f.Add(EncodeRequest(&Request{Op: OpFetch, ID: 3, Offset: 42, MaxBytes: 100, MaxWaitMillis: 5, Stream: "logs"})[0], []byte("logs"))
	f.Add([]byte{1, 2}, []byte{})
	f.Fuzz(func(t *testing.T, h, stream []byte) {
		r, err := DecodeRequest([][]byte{h, stream})
		if err != nil {
			return
		}
		again := EncodeRequest(&r)
		if !bytes.Equal(again[0], h) || !bytes.Equal(again[1], stream) {
			t.Fatalf("re-encoding differs: %x %x vs %x %x", again[0], again[1], h, stream)
		}
	})
}

// FuzzDecodeReply checks that no input panics the reply decoder.
func FuzzDecodeReply(f *testing.F) {
	f.Add(EncodeReply(&Reply{Status: StatusOK, ID: 1, Next: 2, Oldest: 0, High: 3})[0], []byte("data"))
	f.Fuzz(func(t *testing.T, h, data []byte) {
		r, err := DecodeReply([][]byte{h, data})
		if err != nil {
			return
		}
		again := EncodeReply(&r)
		if !bytes.Equal(again[0], h) {
			t.Fatalf("re-encoding differs: %x vs %x", again[0], h)
		}
	})
}
