package pull

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ProtocolVersion is the newest pull protocol version, the one a Consumer
// speaks first. A Server answers requests of versions 1 and 2, each in the
// request's version, and requests of any other version with
// StatusBadRequest. Version 2 adds StatusGap and StatusDamaged; a server
// never sends them to a version 1 request.
const ProtocolVersion = 2

// minProtocolVersion is the oldest version a server answers and a consumer
// falls back to.
const minProtocolVersion = 1

// Op is a request kind.
type Op uint8

// Request kinds.
const (
	// OpFetch asks for stored batches from an offset on.
	OpFetch Op = 1
	// OpMeta asks only for the stream's oldest and next offsets.
	OpMeta Op = 2
	// OpSeekTime asks for the first offset at or after a time (in the
	// request's Offset field, as Unix nanoseconds).
	OpSeekTime Op = 3
)

// Status is the outcome of a request.
type Status uint8

// Reply statuses.
const (
	StatusOK          Status = 0
	StatusUnknown     Status = 1 // the publisher has no such stream
	StatusOutOfRange  Status = 2 // the offset is below the oldest retained one, or beyond the end of the log
	StatusTooLarge    Status = 3 // a single batch exceeds the request's byte limit cap
	StatusBadRequest  Status = 4 // malformed request or unsupported version
	StatusInternal    Status = 5 // the publisher failed to read its spool
	StatusUnavailable Status = 6 // the server is shutting down
	// StatusGap (version 2) says the records from the requested offset up
	// to Next do not exist: the log has a gap there (spool repair removed
	// them). The consumer may go on at Next. Data holds a message.
	StatusGap Status = 7
	// StatusDamaged (version 2) says the stored batch holding the
	// requested offset is damaged on the publisher's disk: it cannot be
	// served until the spool is repaired. Data holds a message.
	StatusDamaged Status = 8
)

// maxStatus returns the highest status of a protocol version.
func maxStatus(version uint8) Status {
	if version >= 2 {
		return StatusDamaged
	}
	return StatusUnavailable
}

// String returns the status in words.
func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusUnknown:
		return "unknown stream"
	case StatusOutOfRange:
		return "offset out of range"
	case StatusTooLarge:
		return "too large"
	case StatusBadRequest:
		return "bad request"
	case StatusInternal:
		return "internal error"
	case StatusUnavailable:
		return "unavailable"
	case StatusGap:
		return "gap"
	case StatusDamaged:
		return "damaged"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Wire layout (all integers big-endian).
//
// Request, two frames after the ROUTER envelope:
//
//	frame 0 (22 bytes): version u8 (1 or 2) | op u8 | id u32 | offset u64 | maxBytes u32 | maxWaitMillis u32
//	frame 1: stream name (1..255 bytes)
//
// Reply, two frames:
//
//	frame 0 (30 bytes): version u8 (the request's) | status u8 | id u32 | next u64 | oldest u64 | high u64
//	frame 1: for StatusOK with OpFetch, zero or more whole spool batches as
//	         they lie on disk; for an error status, a UTF-8 message.
const (
	requestHeaderLen = 22
	replyHeaderLen   = 30
	// MaxStreamName is the longest stream name the protocol carries.
	MaxStreamName = 255
)

// ErrMalformed reports a frame that does not follow the pull protocol.
var ErrMalformed = errors.New("pull: malformed frame")

// Request is one decoded consumer request.
type Request struct {
	// Version is the protocol version; EncodeRequest writes
	// ProtocolVersion for 0.
	Version       uint8
	Op            Op
	ID            uint32
	Offset        uint64
	MaxBytes      uint32
	MaxWaitMillis uint32
	Stream        string
}

// Reply is one decoded server reply.
type Reply struct {
	// Version is the protocol version; EncodeReply writes ProtocolVersion
	// for 0. A server replies in the version of the request.
	Version uint8
	Status  Status
	ID      uint32
	// Next is the offset after the last record in Data (OpFetch), the
	// requested position (OpSeekTime), or the stream's next offset (OpMeta).
	Next uint64
	// Oldest is the oldest retained offset of the stream.
	Oldest uint64
	// High is the stream's next offset at the time of the reply; High-Next
	// is the consumer's lag in records.
	High uint64
	// Data holds raw batches (StatusOK) or an error message.
	Data []byte
}

// appendRequestHeader encodes r's fixed header into dst.
func appendRequestHeader(dst []byte, r *Request) []byte {
	var b [requestHeaderLen]byte
	b[0] = versionOr(r.Version)
	b[1] = byte(r.Op)
	binary.BigEndian.PutUint32(b[2:], r.ID)
	binary.BigEndian.PutUint64(b[6:], r.Offset)
	binary.BigEndian.PutUint32(b[14:], r.MaxBytes)
	binary.BigEndian.PutUint32(b[18:], r.MaxWaitMillis)
	return append(dst, b[:]...)
}

// header checks the frame count, header size and version shared by
// requests and replies (what names which, for errors) and returns the
// header frame.
func header(frames [][]byte, what string, size int) ([]byte, error) {
	if len(frames) != 2 {
		return nil, fmt.Errorf("%w: %s has %d frames, want 2", ErrMalformed, what, len(frames))
	}
	h := frames[0]
	if len(h) != size {
		return nil, fmt.Errorf("%w: %s header is %d bytes, want %d", ErrMalformed, what, len(h), size)
	}
	if h[0] < minProtocolVersion || h[0] > ProtocolVersion {
		return nil, fmt.Errorf("%w: protocol version %d, want %d..%d", ErrMalformed, h[0], minProtocolVersion, ProtocolVersion)
	}
	return h, nil
}

// versionOr returns v, or ProtocolVersion for 0.
func versionOr(v uint8) uint8 {
	if v == 0 {
		return ProtocolVersion
	}
	return v
}

// EncodeRequest returns the frames of r.
func EncodeRequest(r *Request) [][]byte {
	return [][]byte{appendRequestHeader(nil, r), []byte(r.Stream)}
}

// DecodeRequest parses the frames of a request (without the ROUTER
// envelope). It never panics on any input.
func DecodeRequest(frames [][]byte) (Request, error) {
	var r Request
	h, err := header(frames, "request", requestHeaderLen)
	if err != nil {
		return r, err
	}
	r.Version = h[0]
	r.Op = Op(h[1])
	if r.Op < OpFetch || r.Op > OpSeekTime {
		return r, fmt.Errorf("%w: unknown op %d", ErrMalformed, h[1])
	}
	r.ID = binary.BigEndian.Uint32(h[2:])
	r.Offset = binary.BigEndian.Uint64(h[6:])
	r.MaxBytes = binary.BigEndian.Uint32(h[14:])
	r.MaxWaitMillis = binary.BigEndian.Uint32(h[18:])
	if n := len(frames[1]); n == 0 || n > MaxStreamName {
		return r, fmt.Errorf("%w: stream name of %d bytes", ErrMalformed, n)
	}
	r.Stream = string(frames[1])
	return r, nil
}

// EncodeReply returns the frames of r. Data is not copied.
func EncodeReply(r *Reply) [][]byte {
	b := make([]byte, replyHeaderLen)
	b[0] = versionOr(r.Version)
	b[1] = byte(r.Status)
	binary.BigEndian.PutUint32(b[2:], r.ID)
	binary.BigEndian.PutUint64(b[6:], r.Next)
	binary.BigEndian.PutUint64(b[14:], r.Oldest)
	binary.BigEndian.PutUint64(b[22:], r.High)
	data := r.Data
	if data == nil {
		data = []byte{}
	}
	return [][]byte{b, data}
}

// DecodeReply parses the frames of a reply. It never panics on any input.
// Data aliases frames[1].
func DecodeReply(frames [][]byte) (Reply, error) {
	var r Reply
	h, err := header(frames, "reply", replyHeaderLen)
	if err != nil {
		return r, err
	}
	r.Version = h[0]
	r.Status = Status(h[1])
	if r.Status > maxStatus(r.Version) {
		return r, fmt.Errorf("%w: unknown status %d", ErrMalformed, h[1])
	}
	r.ID = binary.BigEndian.Uint32(h[2:])
	r.Next = binary.BigEndian.Uint64(h[6:])
	r.Oldest = binary.BigEndian.Uint64(h[14:])
	r.High = binary.BigEndian.Uint64(h[22:])
	r.Data = frames[1]
	return r, nil
}
