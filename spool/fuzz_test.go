package spool

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
)

// seedBatch encodes one batch the way the writer does.
func seedBatch(c Codec, recs []Record, base uint64) []byte {
	var raw []byte
	minTs := recs[0].Time.UnixNano()
	maxTs := minTs
	for _, r := range recs {
		minTs, maxTs = min(minTs, r.Time.UnixNano()), max(maxTs, r.Time.UnixNano())
	}
	for i := range recs {
		raw = appendRecord(raw, &recs[i], recs[i].ID, uint64(recs[i].Time.UnixNano()-minTs))
	}
	b := make([]byte, batchHeaderLen)
	b = compress(c, b, raw)
	h := batchHeader{Len: uint32(len(b)), Codec: c, Count: uint32(len(recs)), Base: base, MinTime: minTs, MaxTime: maxTs, RawLen: uint32(len(raw))}
	putBatchHeader(b, h)
	h.CRC = crc(b[8:])
	putBatchHeader(b, h)
	return b
}

func seedRecords() []Record {
	t0 := time.Unix(1700000000, 5)
	return []Record{
		{ID: uuid.MustParse("6ba7b810-9dad-41d1-80b4-00c04fd430c8"), Time: t0, Value: []byte("hello")},
		{ID: uuid.MustParse("6ba7b811-9dad-41d1-80b4-00c04fd430c8"), Time: t0.Add(time.Second), Headers: []Header{{"k", []byte("v")}}, Value: bytes.Repeat([]byte("ab"), 40)},
		{Time: t0.Add(2 * time.Second)},
	}
}

func FuzzSegmentHeader(f *testing.F) {
	var h [segHeaderLen]byte
	encodeSegHeader(h[:], 1234, 99)
	f.Add(h[:])
	f.Add(h[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		sh, err := decodeSegHeader(b, "x")
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		var again [segHeaderLen]byte
		encodeSegHeader(again[:], sh.Base, sh.Created)
		if !bytes.Equal(again[:], b[:segHeaderLen]) {
			t.Fatal("accepted header does not re-encode identically")
		}
	})
}

func FuzzDecodeBatches(f *testing.F) {
	recs := seedRecords()
	for _, c := range []Codec{CodecNone, CodecS2, CodecZstd} {
		b := seedBatch(c, recs, 7)
		f.Add(b, uint64(0))
		f.Add(append(b, seedBatch(c, recs[:1], 10)...), uint64(8))
		f.Add(b[:len(b)-1], uint64(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, from uint64) {
		var last uint64
		n := 0
		err := DecodeBatches(data, from, 1<<20, func(r Record) error {
			if n > 0 && r.Offset <= last {
				t.Fatalf("offsets not increasing: %d after %d", r.Offset, last)
			}
			if r.Offset < from {
				t.Fatalf("offset %d below from %d", r.Offset, from)
			}
			last = r.Offset
			n++
			return nil
		})
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("untyped error %v", err)
		}
	})
}

func FuzzDecodeRecord(f *testing.F) {
	for _, r := range seedRecords() {
		f.Add(appendRecord(nil, &r, r.ID, 17))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Record
		n, why := decodeRecord(b, 1000, &r)
		if why != "" {
			return
		}
		if n > len(b) || n <= 0 {
			t.Fatalf("consumed %d of %d", n, len(b))
		}
		// A decoded record re-encodes (canonically) to bytes that decode to
		// the same record; the input may use non-minimal varints.
		again := appendRecord(nil, &r, r.ID, uint64(r.Time.UnixNano()-1000))
		var r2 Record
		if m, why := decodeRecord(again, 1000, &r2); why != "" || m != len(again) {
			t.Fatalf("re-encoded record does not decode: %s", why)
		}
		if err := sameRecord(r, r2); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzCheckBatches: AppendBatches' check of copied batches never panics,
// types every refusal as ErrCorrupt, and accepts only batches that decode
// whole from the offset they claim.
func FuzzCheckBatches(f *testing.F) {
	recs := seedRecords()
	for _, c := range []Codec{CodecNone, CodecS2, CodecZstd} {
		b := seedBatch(c, recs, 7)
		f.Add(b, uint64(7))
		f.Add(append(b, seedBatch(c, recs[:1], 7+uint64(len(recs)))...), uint64(7))
		f.Add(b[:len(b)-1], uint64(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, base uint64) {
		n, err := checkBatches(data, base, 1<<20)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		got := 0
		if err := DecodeBatches(data, base, 1<<20, func(r Record) error { got++; return nil }); err != nil {
			t.Fatalf("checked batches do not decode: %v", err)
		}
		if got != n {
			t.Fatalf("checked %d records, decoded %d", n, got)
		}
	})
}
