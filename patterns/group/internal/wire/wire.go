package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/fastmq/fastmq/spool"
)

// Version is the group protocol's version byte, the first byte of every
// request and reply. It lies outside the pull protocol's versions, so a
// spool server can tell the two apart by the first byte. A publisher of
// this version honours every flag below, so a member sets them without
// asking first.
const Version uint8 = 0x82

// FirstVersion is the group protocol's first version byte. A request of a
// version from FirstVersion to Version-1 gets the answer Unsupported
// builds: status StatusUnsupported, in that version's reply header.
const FirstVersion uint8 = 0x81

// Op is a group request's operation.
type Op uint8

// Operations.
const (
	OpFetch    Op = 1  // lease records (long poll)
	OpAck      Op = 2  // the records are processed
	OpNak      Op = 3  // redeliver, after the entry's delay (0: the backoff's)
	OpProgress Op = 4  // extend the leases by AckWait
	OpTerm     Op = 5  // never redeliver: dead-letter with the entry's reason
	OpLeave    Op = 6  // the member leaves: release all its leases at once
	OpInfo     Op = 7  // the group's state on this publisher (JSON GroupStats)
	OpSeek     Op = 8  // move the group's cursor to the request's start position
	OpList     Op = 9  // every group on this publisher (JSON []GroupStats)
	OpDLQ      Op = 10 // read the group's dead letters from the start value
	OpReplay   Op = 11 // append dead letters back to their stream (JSON ReplayResult)
	// OpAckRanges acknowledges runs of offsets: the body is Ranges, so a
	// member's acks of consecutive records cost 16 bytes per run.
	OpAckRanges Op = 12
	// OpConfigure sets the group's AckWait, MaxDeliver and Backoff (the
	// header's fields and a fetch's backoff body): an operator's op, the
	// only way a group's settings change once it exists.
	OpConfigure Op = 13
)

// Status is a reply's status.
type Status uint8

// Statuses. Error statuses carry a UTF-8 message as data.
const (
	StatusOK           Status = 0
	StatusUnknown      Status = 1  // unknown stream or group
	StatusBadRequest   Status = 4  // malformed request
	StatusInternal     Status = 5  // the publisher failed (e.g. could not write the state)
	StatusUnavailable  Status = 6  // server closing
	StatusPartial      Status = 7  // some entries were refused: data lists them
	StatusLimitReached Status = 8  // the group has its most members (ServerConfig.MaxMembers)
	StatusForbidden    Status = 9  // the client may not read the stream (the spool server's ACL)
	StatusOpen         Status = 10 // records of a FlagStream fetch, which stays open for the rest of its count
	StatusUnsupported  Status = 11 // the request's version is not this publisher's (see Unsupported)
)

// Refusal codes of StatusPartial entries.
const (
	RefusedNotLeased uint8 = 1 // no lease of this member on the offset with that delivery
	RefusedUnknown   uint8 = 2 // offset outside the group's window (acknowledged or never leased)
)

// Start positions of a new group.
const (
	StartEarliest uint8 = 0
	StartLatest   uint8 = 1
	StartOffset   uint8 = 2
	StartTime     uint8 = 3 // start value is Unix nanoseconds
)

// FlagOrdered in a fetch makes the group ordered by key (see the package
// doc).
const FlagOrdered uint8 = 1

// FlagFrames in a fetch lets the publisher split the reply's records over
// several data frames of about FrameBytes each (a record is never cut):
// a receiver's socket hands each out in place, where a large frame is
// copied into a buffer of its own.
const FlagFrames uint8 = 2

// FlagPipeline in a fetch says the member keeps two fetches open at the
// publisher: the publisher parks up to two fetches of the member (a third
// answers the oldest empty) instead of one, so that a record appended
// while one reply travels is leased at once on the other.
const FlagPipeline uint8 = 4

// FlagStream in a fetch keeps it open after a reply that took every
// record there was, with room for more: that reply has status
// StatusOpen, and the fetch stays parked at the publisher for the rest of
// its count and bytes (until a reply uses them or is cut by a limit, its
// wait ends, a newer fetch of the member displaces it, or the member
// leaves: then the last reply has status StatusOK, possibly with no
// records). A member receiving records one or a few at a time then sends
// one fetch per buffer's worth, not one per reply.
const FlagStream uint8 = 16

// FlagLazy in a settle request (ack, ack ranges, nak, term, in progress)
// says the member does not wait for its answer to go on: the publisher
// may hold the request up to its ServerConfig.LazyCommit, so that one
// group commit (one fdatasync) takes the settles of many requests. The
// answer still comes only once the change is on disk. A request without
// the flag is committed at once, and with it whatever lazy ones wait.
const FlagLazy uint8 = 8

// FrameBytes is the size a fetch reply's data frames keep under with
// FlagFrames (a frame holds one record at least): 8 KiB, the largest
// frame our socket hands out as a slice of the block it read it into,
// with no copy and no allocation of its own (a larger one is copied out
// of the block into a buffer of its own: two allocations and a copy of
// every record).
const FrameBytes = 8 << 10

// MaxRangeAcks caps the acknowledgements one OpAckRanges request names
// (a member holds at most group.MaxMaxAckPending leases).
const MaxRangeAcks = 65536

// MaxBackoff is the most backoff values a fetch carries.
const MaxBackoff = 32

// Wire limits. Decoders check them before allocating.
const (
	headerLen     = 38
	replyHdrLen   = 10
	maxNameLen    = 255
	maxEntries    = 256
	maxReasonLen  = 255
	maxRecordSize = 64 << 20
	rangeLen      = 16
)

// Request is a decoded group request.
//
// Frames: 0 header (38 bytes): version u8 | op u8 | id u32 | max records
// u32 | max bytes u32 | wait ms u32 | ack wait ms u32 | max deliver u16 |
// max ack pending u32 | start u8 | start value u64 | flags u8; 1 stream; 2 group; 3
// member id; 4 body (fetch: backoff, n x u32 ms; other ops: entries).
type Request struct {
	Op            Op
	ID            uint32
	MaxRecords    uint32
	MaxBytes      uint32
	WaitMillis    uint32
	AckWaitMillis uint32
	MaxDeliver    uint16
	MaxAckPending uint32
	Start         uint8
	StartValue    uint64
	Flags         uint8 // FlagOrdered, FlagFrames, FlagPipeline, FlagLazy, FlagStream
	Stream        string
	Group         string
	Member        string
	Backoff       []time.Duration
	Entries       []Entry
	Ranges        []Range // OpAckRanges
}

// Range names the leases of Count consecutive offsets from Offset, each
// of delivery Delivery, in an OpAckRanges request.
//
// Encoded as offset u64 | count u32 | delivery u32.
type Range struct {
	Offset   uint64
	Count    uint32
	Delivery uint32
}

// Entry names one lease in an ack, nak, progress or term request: the
// offset and the delivery it acknowledges (a lease is (offset, delivery):
// an ack of an older delivery of the record is refused).
//
// Encoded as offset u64 | delivery u32 | delay ms u32 | reason len u8 |
// reason.
type Entry struct {
	Offset   uint64
	Delivery uint32
	Delay    time.Duration // nak only
	Reason   string        // term only
}

// EncodeRequest returns the frames of r.
func EncodeRequest(r *Request) [][]byte {
	h := make([]byte, headerLen)
	h[0] = Version
	h[1] = byte(r.Op)
	binary.BigEndian.PutUint32(h[2:], r.ID)
	binary.BigEndian.PutUint32(h[6:], r.MaxRecords)
	binary.BigEndian.PutUint32(h[10:], r.MaxBytes)
	binary.BigEndian.PutUint32(h[14:], r.WaitMillis)
	binary.BigEndian.PutUint32(h[18:], r.AckWaitMillis)
	binary.BigEndian.PutUint16(h[22:], r.MaxDeliver)
	binary.BigEndian.PutUint32(h[24:], r.MaxAckPending)
	h[28] = r.Start
	binary.BigEndian.PutUint64(h[29:], r.StartValue)
	h[37] = r.Flags
	var body []byte
	if r.Op == OpFetch || r.Op == OpConfigure {
		for _, d := range r.Backoff {
			body = binary.BigEndian.AppendUint32(body, uint32(d/time.Millisecond))
		}
	} else if r.Op == OpAckRanges {
		body = make([]byte, 0, rangeLen*len(r.Ranges))
		for _, g := range r.Ranges {
			body = binary.BigEndian.AppendUint64(body, g.Offset)
			body = binary.BigEndian.AppendUint32(body, g.Count)
			body = binary.BigEndian.AppendUint32(body, g.Delivery)
		}
	} else {
		for _, e := range r.Entries {
			body = binary.BigEndian.AppendUint64(body, e.Offset)
			body = binary.BigEndian.AppendUint32(body, e.Delivery)
			body = binary.BigEndian.AppendUint32(body, uint32(e.Delay/time.Millisecond))
			reason := e.Reason
			if len(reason) > maxReasonLen {
				reason = reason[:maxReasonLen]
			}
			body = append(body, byte(len(reason)))
			body = append(body, reason...)
		}
	}
	return [][]byte{h, []byte(r.Stream), []byte(r.Group), []byte(r.Member), body}
}

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("group: malformed message")

// Malformed returns an error wrapping ErrMalformed.
func Malformed(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, a...)...)
}

// DecodeRequest decodes a request's frames. It checks every length before
// it allocates.
func DecodeRequest(frames [][]byte) (Request, error) {
	var r Request
	if len(frames) != 5 {
		return r, Malformed("%d frames, want 5", len(frames))
	}
	h := frames[0]
	if len(h) != headerLen {
		return r, Malformed("header of %d bytes, want %d", len(h), headerLen)
	}
	if h[0] != Version {
		return r, Malformed("version %d, want %d", h[0], Version)
	}
	r.Op = Op(h[1])
	if (r.Op < OpFetch || r.Op > OpReplay) && r.Op != OpAckRanges && r.Op != OpConfigure {
		return r, Malformed("unknown op %d", h[1])
	}
	r.ID = binary.BigEndian.Uint32(h[2:])
	r.MaxRecords = binary.BigEndian.Uint32(h[6:])
	r.MaxBytes = binary.BigEndian.Uint32(h[10:])
	r.WaitMillis = binary.BigEndian.Uint32(h[14:])
	r.AckWaitMillis = binary.BigEndian.Uint32(h[18:])
	r.MaxDeliver = binary.BigEndian.Uint16(h[22:])
	r.MaxAckPending = binary.BigEndian.Uint32(h[24:])
	r.Start = h[28]
	r.StartValue = binary.BigEndian.Uint64(h[29:])
	r.Flags = h[37]
	if r.Flags&^(FlagOrdered|FlagFrames|FlagPipeline|FlagLazy|FlagStream) != 0 {
		return r, Malformed("unknown flags %#x", r.Flags)
	}
	if r.Start > StartTime {
		return r, Malformed("unknown start %d", r.Start)
	}
	for i, what := range []string{"stream", "group", "member"} {
		if n := len(frames[1+i]); n == 0 || n > maxNameLen {
			return r, Malformed("%s name of %d bytes", what, n)
		}
	}
	r.Stream, r.Group, r.Member = string(frames[1]), string(frames[2]), string(frames[3])
	body := frames[4]
	if r.Op == OpAckRanges {
		return r, decodeRanges(&r, body)
	}
	if r.Op == OpFetch || r.Op == OpConfigure {
		if len(body)%4 != 0 || len(body)/4 > MaxBackoff {
			return r, Malformed("backoff of %d bytes", len(body))
		}
		if len(body) > 0 {
			r.Backoff = make([]time.Duration, len(body)/4)
			for i := range r.Backoff {
				r.Backoff[i] = time.Duration(binary.BigEndian.Uint32(body[4*i:])) * time.Millisecond
			}
		}
		return r, nil
	}
	if r.Op >= OpLeave {
		if len(body) != 0 {
			return r, Malformed("op %d with a body", r.Op)
		}
		return r, nil
	}
	// Count first, so the slice is allocated once and bounded.
	n := 0
	for p := 0; p < len(body); n++ {
		if n == maxEntries {
			return r, Malformed("more than %d entries", maxEntries)
		}
		if len(body)-p < 17 {
			return r, Malformed("entry %d cut short", n)
		}
		p += 17 + int(body[p+16])
		if p > len(body) {
			return r, Malformed("entry %d's reason cut short", n)
		}
	}
	if n == 0 {
		return r, Malformed("no entries")
	}
	r.Entries = make([]Entry, n)
	for i, p := 0, 0; i < n; i++ {
		e := &r.Entries[i]
		e.Offset = binary.BigEndian.Uint64(body[p:])
		e.Delivery = binary.BigEndian.Uint32(body[p+8:])
		e.Delay = time.Duration(binary.BigEndian.Uint32(body[p+12:])) * time.Millisecond
		rl := int(body[p+16])
		e.Reason = string(body[p+17 : p+17+rl])
		p += 17 + rl
	}
	return r, nil
}

func decodeRanges(r *Request, body []byte) error {
	n := len(body) / rangeLen
	if len(body)%rangeLen != 0 || n == 0 || n > maxEntries {
		return Malformed("ack ranges of %d bytes", len(body))
	}
	r.Ranges = make([]Range, n)
	total := uint64(0)
	for i := range r.Ranges {
		b := body[rangeLen*i:]
		g := Range{binary.BigEndian.Uint64(b), binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[12:])}
		if g.Count == 0 || g.Offset+uint64(g.Count) < g.Offset {
			return Malformed("ack range %d: %d from %d", i, g.Count, g.Offset)
		}
		if total += uint64(g.Count); total > MaxRangeAcks {
			return Malformed("more than %d acks in ranges", MaxRangeAcks)
		}
		r.Ranges[i] = g
	}
	return nil
}

// Reply is a decoded group reply.
//
// Frames: 0 header (10 bytes): version u8 | status u8 | id u32 | count
// u32; 1 data (with FlagFrames, an ok fetch's records may come in
// frames 1, 2, ..., none cut). For an ok fetch, data holds count records, each: offset
// u64 | delivery u32 | time ns i64 | header count u16 | (key len u16 |
// key | value len u32 | value) per header | value len u32 | value. For
// StatusPartial, data holds count refused entries, each offset u64 |
// code u8. Error statuses carry a message.
type Reply struct {
	Status  Status
	ID      uint32
	Count   uint32
	Data    []byte   // the first data frame
	Records []Record // decoded from the data frames by DecodeReply for ok fetches

	// Parts are a member's fetch reply's data frames, which its fetch
	// loop decodes (DecodeParts) as it delivers them.
	Parts [][]byte
}

// Record is one leased record on the wire.
type Record struct {
	Offset   uint64
	Delivery uint32
	Time     time.Time
	Headers  []spool.Header
	Value    []byte
}

// Unsupported returns the answer to request, whose version byte is not
// Version: a reply header of the request's own version byte (so that a
// peer of that version decodes it), status StatusUnsupported, the
// request's id, and a message naming both versions.
func Unsupported(request [][]byte) [][]byte {
	h := make([]byte, replyHdrLen)
	var v byte
	if len(request) > 0 && len(request[0]) > 0 {
		v = request[0][0]
		if len(request[0]) >= 6 {
			copy(h[2:6], request[0][2:6])
		}
	}
	h[0] = v
	h[1] = byte(StatusUnsupported)
	msg := fmt.Sprintf("group protocol version %#x unsupported: this publisher speaks %#x", v, Version)
	return [][]byte{h, []byte(msg)}
}

// EncodeReply returns the frames of r (Records, if any, are appended to
// Data).
func EncodeReply(r *Reply) [][]byte {
	h := make([]byte, replyHdrLen)
	h[0] = Version
	h[1] = byte(r.Status)
	binary.BigEndian.PutUint32(h[2:], r.ID)
	data := r.Data
	count := r.Count
	if len(r.Records) > 0 {
		count = uint32(len(r.Records))
		for i := range r.Records {
			data = appendRecord(data, &r.Records[i])
		}
	}
	binary.BigEndian.PutUint32(h[6:], count)
	return [][]byte{h, data}
}

func appendRecord(b []byte, rec *Record) []byte {
	return AppendRecord(b, rec.Offset, rec.Delivery, rec.Time, rec.Headers, rec.Value)
}

// AppendRecord appends a fetch reply's record (see Reply); the
// publisher appends its spool's records with it (AppendSpool).
func AppendRecord(b []byte, offset uint64, delivery uint32, t time.Time, headers []spool.Header, value []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, offset)
	b = binary.BigEndian.AppendUint32(b, delivery)
	b = binary.BigEndian.AppendUint64(b, uint64(t.UnixNano()))
	b = binary.BigEndian.AppendUint16(b, uint16(len(headers)))
	for _, h := range headers {
		b = binary.BigEndian.AppendUint16(b, uint16(len(h.Key)))
		b = append(b, h.Key...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(h.Value)))
		b = append(b, h.Value...)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

// DecodeReply decodes a reply's frames; for an ok reply with a count it
// decodes the records. It checks every length before it allocates.
func DecodeReply(frames [][]byte, fetch bool) (Reply, error) {
	var r Reply
	if len(frames) < 2 || (len(frames) > 2 && !fetch) {
		return r, Malformed("%d reply frames, want 2", len(frames))
	}
	parts := frames[1:]
	frames = frames[:2]
	h := frames[0]
	if len(h) != replyHdrLen || h[0] != Version {
		return r, Malformed("reply header of %d bytes", len(h))
	}
	r.Status = Status(h[1])
	r.ID = binary.BigEndian.Uint32(h[2:])
	r.Count = binary.BigEndian.Uint32(h[6:])
	r.Data = frames[1]
	if r.Status == StatusPartial {
		if uint64(len(r.Data)) != uint64(r.Count)*9 {
			return r, Malformed("%d refusals in %d bytes", r.Count, len(r.Data))
		}
	}
	records := r.Status == StatusOK || r.Status == StatusOpen
	if len(parts) > 1 && (!records || r.Count == 0) {
		return r, Malformed("%d data frames in a reply without records", len(parts))
	}
	if !records || !fetch || r.Count == 0 {
		return r, nil
	}
	if uint64(r.Count)*26 > PartsLen(parts) {
		return r, Malformed("%d records in %d bytes", r.Count, PartsLen(parts))
	}
	r.Records = make([]Record, 0, r.Count)
	err := DecodeParts(parts, r.Count, func(rec *Record) { r.Records = append(r.Records, *rec) })
	return r, err
}

// PartsLen returns the bytes of a reply's data frames.
func PartsLen(parts [][]byte) uint64 {
	n := uint64(0)
	for _, p := range parts {
		n += uint64(len(p))
	}
	return n
}

// DecodeParts decodes count records from a fetch reply's data frames,
// each holding whole records (no frame empty), calling f for each.
func DecodeParts(parts [][]byte, count uint32, f func(rec *Record)) error {
	left := count
	for i, p := range parts {
		n, err := decodeFrame(p, left, f)
		if err != nil {
			return err
		}
		if n == 0 {
			return Malformed("data frame %d holds no record", i)
		}
		left -= n
	}
	if left > 0 {
		return Malformed("%d of %d records missing", left, count)
	}
	return nil
}

// decodeFrame decodes the records of one data frame, at most max, calling
// f for each; it returns how many it decoded. Bytes left after max
// records are an error, as is a record cut short.
func decodeFrame(b []byte, max uint32, f func(rec *Record)) (uint32, error) {
	var rec Record
	i := uint32(0)
	for ; i < max && len(b) > 0; i++ {
		if len(b) < 22 {
			return i, Malformed("record %d cut short", i)
		}
		rec = Record{Offset: binary.BigEndian.Uint64(b), Delivery: binary.BigEndian.Uint32(b[8:]),
			Time: time.Unix(0, int64(binary.BigEndian.Uint64(b[12:])))}
		nh := int(binary.BigEndian.Uint16(b[20:]))
		b = b[22:]
		if nh*6 > len(b) {
			return i, Malformed("record %d: %d headers in %d bytes", i, nh, len(b))
		}
		if nh > 0 {
			rec.Headers = make([]spool.Header, nh)
		}
		for j := 0; j < nh; j++ {
			if len(b) < 2 {
				return i, Malformed("record %d header %d cut short", i, j)
			}
			kl := int(binary.BigEndian.Uint16(b))
			if len(b) < 2+kl+4 {
				return i, Malformed("record %d header %d cut short", i, j)
			}
			rec.Headers[j].Key = string(b[2 : 2+kl])
			vl := uint64(binary.BigEndian.Uint32(b[2+kl:]))
			b = b[6+kl:]
			if vl > uint64(len(b)) {
				return i, Malformed("record %d header %d value cut short", i, j)
			}
			rec.Headers[j].Value = b[:vl:vl]
			b = b[vl:]
		}
		if len(b) < 4 {
			return i, Malformed("record %d value cut short", i)
		}
		vl := uint64(binary.BigEndian.Uint32(b))
		b = b[4:]
		if vl > uint64(len(b)) || vl > maxRecordSize {
			return i, Malformed("record %d value of %d bytes in %d", i, vl, len(b))
		}
		rec.Value = b[:vl:vl]
		b = b[vl:]
		f(&rec)
	}
	if len(b) != 0 {
		return i, Malformed("%d bytes after the records", len(b))
	}
	return i, nil
}
