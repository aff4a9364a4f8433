package wire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/fastmq/fastmq/spool"
)

func TestRequestRoundTrip(t *testing.T) {
	for _, r := range []Request{
		{Op: OpFetch, ID: 7, MaxRecords: 10, MaxBytes: 1 << 20, WaitMillis: 500, AckWaitMillis: 30000, MaxDeliver: 5, MaxAckPending: 100,
			Start: StartOffset, StartValue: 42, Stream: "s", Group: "g", Member: "n/1", Backoff: []time.Duration{time.Second, 2 * time.Second}},
		{Op: OpAck, ID: 8, Stream: "s", Group: "g", Member: "n/1", Entries: []Entry{{Offset: 1, Delivery: 1}, {Offset: 1 << 40, Delivery: 3}}},
		{Op: OpNak, ID: 9, Stream: "s", Group: "g", Member: "n/1", Entries: []Entry{{Offset: 5, Delivery: 2, Delay: 1500 * time.Millisecond}}},
		{Op: OpTerm, ID: 10, Stream: "s", Group: "g", Member: "n/1", Entries: []Entry{{Offset: 5, Delivery: 2, Reason: "poison"}}},
		{Op: OpLeave, ID: 11, Stream: "s", Group: "g", Member: "n/1"},
		{Op: OpInfo, ID: 12, Stream: "s", Group: "g", Member: "admin"},
		{Op: OpSeek, ID: 13, Stream: "s", Group: "g", Member: "admin", Start: StartTime, StartValue: 1 << 62},
		{Op: OpAckRanges, ID: 14, Stream: "s", Group: "g", Member: "n/1", Ranges: []Range{{Offset: 3, Count: 100, Delivery: 1}, {Offset: 1 << 50, Count: 1, Delivery: 7}}},
	} {
		got, err := DecodeRequest(EncodeRequest(&r))
		if err != nil {
			t.Fatalf("op %d: %v", r.Op, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
		}
	}
}

func TestReplyRoundTrip(t *testing.T) {
	r := Reply{Status: StatusOK, ID: 3, Records: []Record{
		{Offset: 1, Delivery: 1, Time: time.Unix(0, 12345), Value: []byte("a")},
		{Offset: 9, Delivery: 2, Time: time.Unix(0, 99), Headers: []spool.Header{{Key: "k", Value: []byte("v")}}, Value: []byte{}},
	}}
	got, err := DecodeReply(EncodeReply(&r), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Records) != 2 || got.Records[1].Headers[0].Key != "k" || !bytes.Equal(got.Records[0].Value, []byte("a")) || !got.Records[0].Time.Equal(r.Records[0].Time) {
		t.Fatalf("got %+v", got.Records)
	}
}

func TestDecodeRefusesMalformed(t *testing.T) {
	good := EncodeRequest(&Request{Op: OpAck, Stream: "s", Group: "g", Member: "m", Entries: []Entry{{Offset: 1, Delivery: 1}}})
	ranges := EncodeRequest(&Request{Op: OpAckRanges, Stream: "s", Group: "g", Member: "m", Ranges: []Range{{Offset: 1, Count: 2, Delivery: 1}}})
	cases := map[string][][]byte{
		"no frames":         nil,
		"short header":      {good[0][:10], good[1], good[2], good[3], good[4]},
		"bad version":       {append([]byte{1}, good[0][1:]...), good[1], good[2], good[3], good[4]},
		"bad op":            {append([]byte{Version, 99}, good[0][2:]...), good[1], good[2], good[3], good[4]},
		"empty group":       {good[0], good[1], nil, good[3], good[4]},
		"no entries":        {good[0], good[1], good[2], good[3], nil},
		"cut entry":         {good[0], good[1], good[2], good[3], good[4][:10]},
		"cut reason":        {good[0], good[1], good[2], good[3], append(append([]byte{}, good[4][:16]...), 200)},
		"too many":          {good[0], good[1], good[2], good[3], bytes.Repeat(good[4], maxEntries+1)},
		"backoff bytes":     {EncodeRequest(&Request{Op: OpFetch})[0], good[1], good[2], good[3], []byte{1, 2, 3}},
		"seek body":         {EncodeRequest(&Request{Op: OpSeek})[0], good[1], good[2], good[3], good[4]},
		"seek start":        {EncodeRequest(&Request{Op: OpSeek, Start: StartTime + 1})[0], good[1], good[2], good[3], nil},
		"configure backoff": {EncodeRequest(&Request{Op: OpConfigure})[0], good[1], good[2], good[3], []byte{1, 2, 3}},
		"op 14":             {append([]byte{Version, 14}, good[0][2:]...), good[1], good[2], good[3], nil},
		"replay body":       {EncodeRequest(&Request{Op: OpReplay})[0], good[1], good[2], good[3], good[4]},
		"range bytes":       {ranges[0], good[1], good[2], good[3], ranges[4][:15]},
		"no ranges":         {ranges[0], good[1], good[2], good[3], nil},
		"empty range":       {EncodeRequest(&Request{Op: OpAckRanges, Ranges: []Range{{Offset: 1}}})[0], good[1], good[2], good[3], EncodeRequest(&Request{Op: OpAckRanges, Ranges: []Range{{Offset: 1}}})[4]},
		"range wraps":       {ranges[0], good[1], good[2], good[3], EncodeRequest(&Request{Op: OpAckRanges, Ranges: []Range{{Offset: 1<<64 - 2, Count: 5}}})[4]},
		"range acks":        {ranges[0], good[1], good[2], good[3], EncodeRequest(&Request{Op: OpAckRanges, Ranges: []Range{{Count: 40000}, {Offset: 50000, Count: 40000}}})[4]},
	}
	for name, frames := range cases {
		if _, err := DecodeRequest(frames); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	// A reply claiming more records than its bytes can hold fails before
	// allocating them.
	h := EncodeReply(&Reply{Status: StatusOK, Count: 1 << 31})
	if _, err := DecodeReply(h, true); !errors.Is(err, ErrMalformed) {
		t.Fatalf("huge count: %v", err)
	}
}

func FuzzDecodeRequest(f *testing.F) {
	for _, r := range []Request{
		{Op: OpFetch, Stream: "s", Group: "g", Member: "m", Backoff: []time.Duration{time.Second}},
		{Op: OpTerm, Stream: "s", Group: "g", Member: "m", Entries: []Entry{{Offset: 1, Delivery: 1, Reason: "x"}}},
		{Op: OpSeek, Stream: "s", Group: "g", Member: "m", Start: StartOffset, StartValue: 42},
		{Op: OpSeek, Stream: "s", Group: "g", Member: "m", Start: StartTime, StartValue: 1 << 60},
		{Op: OpInfo, Stream: "s", Group: "g", Member: "m"},
		{Op: OpList, Stream: "*", Group: "*", Member: "m"},
		{Op: OpDLQ, Stream: "s", Group: "g", Member: "m", StartValue: 3, MaxRecords: 10},
		{Op: OpReplay, Stream: "s", Group: "g", Member: "m", StartValue: 0, MaxRecords: 1},
		{Op: OpAckRanges, Stream: "s", Group: "g", Member: "m", Ranges: []Range{{Offset: 1, Count: 9, Delivery: 1}}},
	} {
		fr := EncodeRequest(&r)
		f.Add(fr[0], fr[1], fr[4])
	}
	f.Fuzz(func(t *testing.T, h, stream, body []byte) {
		r, err := DecodeRequest([][]byte{h, stream, []byte("g"), []byte("m"), body})
		if err != nil {
			return
		}
		if r.Op >= OpLeave && (r.Entries != nil || r.Backoff != nil) {
			t.Fatalf("op %d decoded with a body: %+v", r.Op, r)
		}
		if r.Start > StartTime {
			t.Fatalf("start %d decoded", r.Start)
		}
		// What decodes re-encodes to a request that decodes the same.
		again, err := DecodeRequest(EncodeRequest(&r))
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("re-decode: %v\n%+v\n%+v", err, again, r)
		}
	})
}

func FuzzDecodeReply(f *testing.F) {
	fr := EncodeReply(&Reply{Records: []Record{{Offset: 1, Delivery: 1, Headers: []spool.Header{{Key: "k", Value: []byte("v")}}, Value: []byte("x")}}})
	f.Add(fr[0], fr[1])
	f.Add(EncodeReply(&Reply{Status: StatusPartial, Count: 1, Data: make([]byte, 9)})[0], make([]byte, 9))
	f.Fuzz(func(t *testing.T, h, data []byte) {
		r, err := DecodeReply([][]byte{h, data}, true)
		if err != nil || r.Status != StatusOK {
			return
		}
		if len(r.Records) != int(r.Count) {
			t.Fatalf("%d records, count %d", len(r.Records), r.Count)
		}
	})
}

// AppendSpool (a lease's records, encoded as they are read) writes what
// EncodeReply writes for the same records as Records.
func TestAppendWire(t *testing.T) {
	recs := []spool.Record{
		{Offset: 7, Time: time.Unix(0, 42), Value: []byte("v")},
		{Offset: 9, Time: time.Unix(5, 0), Headers: []spool.Header{{Key: "k", Value: []byte("x")}, {Key: "e"}}, Value: []byte{}},
	}
	var data []byte
	var recs2 []Record
	for i := range recs {
		data = AppendSpool(data, &recs[i], uint32(i+1))
		recs2 = append(recs2, FromSpool(recs[i], uint32(i+1)))
	}
	want := EncodeReply(&Reply{ID: 1, Records: recs2})
	got := EncodeReply(&Reply{ID: 1, Count: uint32(len(recs)), Data: data})
	if !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
		t.Fatalf("AppendSpool:\n got %x\nwant %x", got, want)
	}
}

func FuzzDecodeReplyFrames(f *testing.F) {
	recs := []spool.Record{{Offset: 1, Value: []byte("x")}, {Offset: 2, Headers: []spool.Header{{Key: "k", Value: []byte("v")}}, Value: []byte("y")}}
	a, b := AppendSpool(nil, &recs[0], 1), AppendSpool(nil, &recs[1], 1)
	fr := FetchReply(1, 2, [][]byte{a, b})
	f.Add(fr[0], fr[1], fr[2])
	f.Fuzz(func(t *testing.T, h, a, b []byte) {
		r, err := DecodeReply([][]byte{h, a, b}, true)
		if err != nil {
			return
		}
		// Only replies that carry records (ok, or a stream's open) have
		// several data frames.
		if (r.Status != StatusOK && r.Status != StatusOpen) || len(r.Records) != int(r.Count) || r.Count < 2 {
			t.Fatalf("status %d, %d records, count %d from two data frames", r.Status, len(r.Records), r.Count)
		}
	})
}

// A fetch reply split into data frames (FlagFrames) decodes to the
// records of the whole; a frame cut inside a record, an empty frame and
// records missing are refused.
func TestFetchReplyFrames(t *testing.T) {
	data := ReplyData{Split: true, MaxBytes: 8 << 20}
	var want []Record
	size := 0
	for i := range 700 {
		r := spool.Record{Offset: uint64(i), Time: time.Unix(0, int64(i)), Value: bytes.Repeat([]byte{byte(i)}, 100)}
		if i%7 == 0 {
			r.Headers = []spool.Header{{Key: "k", Value: []byte("v")}}
		}
		if i == 351 {
			r.Value = bytes.Repeat([]byte{1}, FrameBytes) // a frame of its own
		}
		data.Add(&r, 1, 700-i)
		size += RecordLen(&r)
		want = append(want, FromSpool(r, 1))
	}
	frames := FetchReply(3, uint32(len(want)), data.Done())
	if len(frames) < 5 {
		t.Fatalf("%d frames for %d bytes", len(frames), size)
	}
	for _, f := range frames[1:] {
		if len(f) > FrameBytes && len(f) != RecordLen(&spool.Record{Value: make([]byte, FrameBytes)}) {
			t.Fatalf("a data frame of %d bytes", len(f))
		}
		if cap(f) > 32<<10 && len(f) <= FrameBytes {
			t.Fatalf("a data frame of %d bytes in a buffer of %d: a large allocation", len(f), cap(f))
		}
	}
	r, err := DecodeReply(frames, true)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Records, want) {
		t.Fatalf("records differ after the split")
	}
	bad := map[string][][]byte{
		"cut inside a record": append([][]byte{frames[0], frames[1][:100], frames[1][100:]}, frames[2:]...),
		"empty frame":         append([][]byte{frames[0], {}}, frames[1:]...),
		"records missing":     frames[:len(frames)-1],
	}
	for name, fr := range bad {
		if _, err := DecodeReply(fr, true); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := DecodeReply(frames, false); err == nil {
		t.Errorf("a reply of %d frames decoded as no fetch's", len(frames))
	}
}
