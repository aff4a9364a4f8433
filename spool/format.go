package spool

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/google/uuid"
)

const (
	formatVersion   = 1
	segHeaderLen    = 32
	batchHeaderLen  = 48
	batchVersion    = 1
	segMagic        = "FMQS"
	segSuffix       = ".seg"
	minRecordLen    = 1 + 16 + 1 + 1 // body length, id, time delta, header count
	defaultMaxRec   = 4 << 20
	defaultMaxBatch = 8 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Header is one record header: a key and a value.
type Header struct {
	Key   string
	Value []byte
}

// Record is one entry of the log. On Append, a zero ID is replaced by a new
// random (version 4) UUID and a zero Time by the time of the Append call;
// Offset is ignored. Records returned by readers carry their offset.
type Record struct {
	Offset  uint64
	ID      uuid.UUID
	Time    time.Time
	Headers []Header
	Value   []byte
}

// segHeader is the fixed header at the start of each segment file.
type segHeader struct {
	Version int
	Base    uint64
	Created int64
}

func encodeSegHeader(b []byte, base uint64, created int64) {
	_ = b[segHeaderLen-1]
	copy(b[0:4], segMagic)
	binary.LittleEndian.PutUint16(b[4:], formatVersion)
	binary.LittleEndian.PutUint16(b[6:], 0)
	binary.LittleEndian.PutUint64(b[8:], base)
	binary.LittleEndian.PutUint64(b[16:], uint64(created))
	binary.LittleEndian.PutUint32(b[24:], 0)
	binary.LittleEndian.PutUint32(b[28:], crc(b[:28]))
}

// decodeSegHeader parses and checks a segment header. name is used in errors.
func decodeSegHeader(b []byte, name string) (segHeader, error) {
	if len(b) < segHeaderLen {
		return segHeader{}, &CorruptError{Segment: name, Reason: fmt.Sprintf("segment header truncated (%d bytes)", len(b))}
	}
	if string(b[0:4]) != segMagic {
		return segHeader{}, &CorruptError{Segment: name, Reason: "bad segment magic"}
	}
	if got, want := crc(b[:28]), binary.LittleEndian.Uint32(b[28:]); got != want {
		return segHeader{}, &CorruptError{Segment: name, Reason: "segment header checksum mismatch"}
	}
	h := segHeader{
		Version: int(binary.LittleEndian.Uint16(b[4:])),
		Base:    binary.LittleEndian.Uint64(b[8:]),
		Created: int64(binary.LittleEndian.Uint64(b[16:])),
	}
	if h.Version != formatVersion {
		return h, &VersionError{Segment: name, Version: h.Version}
	}
	if f := binary.LittleEndian.Uint16(b[6:]); f != 0 {
		return h, &CorruptError{Segment: name, Offset: h.Base, Reason: fmt.Sprintf("unknown segment flags %#x", f)}
	}
	return h, nil
}

// batchHeader is the fixed header of a stored batch.
type batchHeader struct {
	Len     uint32
	CRC     uint32
	Version uint8
	Codec   Codec
	Count   uint32
	Base    uint64
	MinTime int64
	MaxTime int64
	RawLen  uint32
}

func putBatchHeader(b []byte, h batchHeader) {
	_ = b[batchHeaderLen-1]
	binary.LittleEndian.PutUint32(b[0:], h.Len)
	binary.LittleEndian.PutUint32(b[4:], h.CRC)
	b[8] = batchVersion
	b[9] = byte(h.Codec)
	binary.LittleEndian.PutUint16(b[10:], 0)
	binary.LittleEndian.PutUint32(b[12:], h.Count)
	binary.LittleEndian.PutUint64(b[16:], h.Base)
	binary.LittleEndian.PutUint64(b[24:], uint64(h.MinTime))
	binary.LittleEndian.PutUint64(b[32:], uint64(h.MaxTime))
	binary.LittleEndian.PutUint32(b[40:], h.RawLen)
	binary.LittleEndian.PutUint32(b[44:], 0)
}

func parseBatchHeader(b []byte) batchHeader {
	_ = b[batchHeaderLen-1]
	return batchHeader{
		Len:     binary.LittleEndian.Uint32(b[0:]),
		CRC:     binary.LittleEndian.Uint32(b[4:]),
		Version: b[8],
		Codec:   Codec(b[9]),
		Count:   binary.LittleEndian.Uint32(b[12:]),
		Base:    binary.LittleEndian.Uint64(b[16:]),
		MinTime: int64(binary.LittleEndian.Uint64(b[24:])),
		MaxTime: int64(binary.LittleEndian.Uint64(b[32:])),
		RawLen:  binary.LittleEndian.Uint32(b[40:]),
	}
}

// maxStored is the largest stored payload accepted for a raw limit.
func maxStored(maxBatch int) int { return maxBatch + maxBatch/4 + 1024 }

// checkBatchHeader validates the fields of a batch header that can be checked
// without the payload. It returns a reason, or "" when plausible.
func checkBatchHeader(h batchHeader, maxBatch int) string {
	switch {
	case h.Len < batchHeaderLen:
		return fmt.Sprintf("batch length %d shorter than its header", h.Len)
	case h.Version != batchVersion:
		return fmt.Sprintf("unknown batch version %d", h.Version)
	case h.Codec > CodecZstd:
		return fmt.Sprintf("unknown codec %d", h.Codec)
	case h.Count == 0:
		return "batch with no records"
	case int64(h.RawLen) > int64(maxBatch):
		return fmt.Sprintf("decompressed batch length %d exceeds limit %d", h.RawLen, maxBatch)
	case int64(h.Len)-batchHeaderLen > int64(maxStored(maxBatch)):
		return fmt.Sprintf("stored batch length %d exceeds limit", h.Len)
	case uint64(h.Count)*minRecordLen > uint64(h.RawLen):
		return fmt.Sprintf("%d records cannot fit in %d bytes", h.Count, h.RawLen)
	case h.MaxTime < h.MinTime:
		return "batch last time before first time"
	case h.Codec == CodecNone && h.RawLen != h.Len-batchHeaderLen:
		return "uncompressed batch length mismatch"
	}
	return ""
}

// recordBodyLen is the encoded body length of r (without its length prefix),
// with time delta d.
func recordBodyLen(r *Record, d uint64) int {
	n := 16 + uvarintLen(d) + uvarintLen(uint64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		n += uvarintLen(uint64(len(h.Key))) + len(h.Key) + uvarintLen(uint64(len(h.Value))) + len(h.Value)
	}
	return n + len(r.Value)
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// appendRecord appends the encoding of r (length prefix and body) to b.
func appendRecord(b []byte, r *Record, id uuid.UUID, d uint64) []byte {
	body := recordBodyLen(r, d)
	b = binary.AppendUvarint(b, uint64(body))
	b = append(b, id[:]...)
	b = binary.AppendUvarint(b, d)
	b = binary.AppendUvarint(b, uint64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		b = binary.AppendUvarint(b, uint64(len(h.Key)))
		b = append(b, h.Key...)
		b = binary.AppendUvarint(b, uint64(len(h.Value)))
		b = append(b, h.Value...)
	}
	return append(b, r.Value...)
}

// decodeRecord decodes the record at the start of p. Slices in the result
// alias p. It returns the number of bytes consumed.
func decodeRecord(p []byte, minTime int64, r *Record) (int, string) {
	var body uint64
	n := 1
	if len(p) > 0 && p[0] < 0x80 {
		body = uint64(p[0])
	} else {
		body, n = binary.Uvarint(p)
		if n <= 0 {
			return 0, "bad record length"
		}
	}
	if body > uint64(len(p)-n) {
		return 0, "record length out of bounds"
	}
	b := p[n : n+int(body)]
	total := n + int(body)
	if len(b) < 18 {
		return 0, "record shorter than its id"
	}
	copy(r.ID[:], b[:16])
	var d uint64
	if b[16] < 0x80 {
		d, b = uint64(b[16]), b[17:]
	} else {
		var k int
		d, k = binary.Uvarint(b[16:])
		if k <= 0 || d > 1<<62 {
			return 0, "bad record time"
		}
		b = b[16+k:]
	}
	r.Time = time.Unix(0, minTime+int64(d))
	r.Headers = nil
	if len(b) == 0 {
		return 0, "missing header count"
	}
	if b[0] == 0 {
		b = b[1:]
	} else {
		nh, k := binary.Uvarint(b)
		// Each header takes at least two bytes (two length varints), so a
		// count above len(b)/2 is a lie; never allocate on its word.
		if k <= 0 || nh > uint64(len(b)-k)/2 {
			return 0, "bad header count"
		}
		b = b[k:]
		r.Headers = make([]Header, nh)
		for i := range r.Headers {
			kl, k := binary.Uvarint(b)
			if k <= 0 || kl > uint64(len(b)-k) {
				return 0, "bad header key"
			}
			r.Headers[i].Key = string(b[k : k+int(kl)])
			b = b[k+int(kl):]
			vl, k := binary.Uvarint(b)
			if k <= 0 || vl > uint64(len(b)-k) {
				return 0, "bad header value"
			}
			r.Headers[i].Value = b[k : k+int(vl) : k+int(vl)]
			b = b[k+int(vl):]
		}
	}
	r.Value = b[:len(b):len(b)]
	return total, ""
}

// batchView is one decoded (decompressed, checked) batch being iterated.
type batchView struct {
	h   batchHeader
	raw []byte // decompressed payload
	pos int    // next record position in raw
	i   uint32 // next record index
}

// openBatch checks the batch at the start of data and decompresses it. It
// returns the batch view and the stored length. pos is used in errors.
func openBatch(data []byte, maxBatch int, pos int64, seg string, expect uint64) (batchView, int, error) {
	if len(data) < batchHeaderLen {
		return batchView{}, 0, &CorruptError{Segment: seg, Pos: pos, Offset: expect, Reason: "truncated batch header"}
	}
	h := parseBatchHeader(data)
	if r := checkBatchHeader(h, maxBatch); r != "" {
		return batchView{}, 0, &CorruptError{Segment: seg, Pos: pos, Offset: expect, Reason: r}
	}
	if int64(h.Len) > int64(len(data)) {
		return batchView{}, 0, &CorruptError{Segment: seg, Pos: pos, Offset: h.Base, Reason: "truncated batch"}
	}
	b := data[:h.Len]
	if crc(b[8:]) != h.CRC {
		return batchView{}, 0, &CorruptError{Segment: seg, Pos: pos, Offset: expect, Reason: "batch checksum mismatch"}
	}
	raw, err := decompress(h.Codec, b[batchHeaderLen:], int(h.RawLen))
	if err != nil {
		return batchView{}, 0, &CorruptError{Segment: seg, Pos: pos, Offset: h.Base, Reason: "decompress: " + err.Error()}
	}
	return batchView{h: h, raw: raw}, int(h.Len), nil
}

// next decodes the next record of the batch; ok is false at the end.
func (v *batchView) next(r *Record, pos int64, seg string) (bool, error) {
	if v.i >= v.h.Count {
		if v.pos != len(v.raw) {
			return false, &CorruptError{Segment: seg, Pos: pos, Offset: v.h.Base, Reason: "trailing bytes after last record"}
		}
		return false, nil
	}
	n, why := decodeRecord(v.raw[v.pos:], v.h.MinTime, r)
	if why != "" {
		return false, &CorruptError{Segment: seg, Pos: pos, Offset: v.h.Base + uint64(v.i), Reason: why}
	}
	if r.Time.UnixNano() > v.h.MaxTime {
		return false, &CorruptError{Segment: seg, Pos: pos, Offset: v.h.Base + uint64(v.i), Reason: "record time after batch last time"}
	}
	r.Offset = v.h.Base + uint64(v.i)
	v.pos += n
	v.i++
	return true, nil
}

// DecodeBatches decodes whole stored batches, as returned by Log.ReadRaw, and
// calls fn for every record with Offset >= from, in order. Each batch's
// checksum is verified before it is decompressed, and no batch may declare a
// decompressed size above maxBatchBytes (0 means the default, 8 MiB). Slices
// in the records alias data (codec none) or a fresh buffer per batch; neither
// is reused, so fn may retain them. Damage gives a *CorruptError whose Pos is
// the byte position in data. An error from fn stops decoding and is returned
// as is.
func DecodeBatches(data []byte, from uint64, maxBatchBytes int, fn func(Record) error) error {
	if maxBatchBytes <= 0 {
		maxBatchBytes = defaultMaxBatch
	}
	pos := 0
	expect := from
	for pos < len(data) {
		v, n, err := openBatch(data[pos:], maxBatchBytes, int64(pos), "", expect)
		if err != nil {
			return err
		}
		var r Record
		for {
			ok, err := v.next(&r, int64(pos), "")
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if r.Offset >= from {
				if err := fn(r); err != nil {
					return err
				}
			}
		}
		expect = v.h.Base + uint64(v.h.Count)
		pos += n
	}
	return nil
}
