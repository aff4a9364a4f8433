package pull

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// ProtocolVersion is the newest pull protocol version, the one a Consumer
// speaks first. A Server answers requests of versions 1 to 3, each in the
// request's version, and requests of any other version with
// StatusBadRequest. Version 2 adds StatusGap, StatusDamaged,
// StatusOtherLog and StatusDiverged, and the log identity and epoch in
// requests and replies; a server never sends them to a version 1 request.
// Version 3 adds StatusForbidden, which a server never sends to an older
// request. Version 4 adds the consumer's name and node to requests (two
// more frames), for the server's report of its readers (Server.Clients).
const ProtocolVersion = 4

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
	// OpReaders (version 4) asks for the server's readers of the stream
	// (AllStreams: of every stream the client may list), as JSON
	// []ClientStats in the reply's data (see Server.Clients).
	OpReaders Op = 4
)

// AllStreams in an OpReaders request asks about every stream.
const AllStreams = "*"

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
	// StatusOtherLog (version 2) says the fetch's position belongs to
	// another log: the request names a log identity other than the
	// stream's, or an epoch the stream's log never reached. The
	// consumer must not continue those offsets. LogID and Epoch are the
	// stream's; Data holds a message.
	StatusOtherLog Status = 9
	// StatusDiverged (version 2) says the log lost records the consumer
	// had read: the request's epoch ended at Next, below the requested
	// offset, so the offsets from Next up to the requested one now name
	// other records (or none yet). The consumer continues at Next. Data
	// holds a message.
	StatusDiverged Status = 10
	// StatusForbidden (version 3) says the server's ACL does not let this
	// client read the stream: the same reply whether the stream exists or
	// not. Data holds ForbiddenMessage. The consumer stops pulling the
	// stream from that publisher.
	StatusForbidden Status = 11
)

// NoEpoch in a request's Epoch says the consumer has no position to check
// (it starts fresh, or resumes from an offset kept without its log's
// identity): the server serves the offset without the epoch check.
const NoEpoch = ^uint32(0)

// maxStatus returns the highest status of a protocol version.
func maxStatus(version uint8) Status {
	if version >= 3 {
		return StatusForbidden
	}
	if version >= 2 {
		return StatusDiverged
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
	case StatusOtherLog:
		return "another log"
	case StatusDiverged:
		return "diverged"
	case StatusForbidden:
		return "forbidden"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Wire layout (all integers big-endian).
//
// Request, two frames after the ROUTER envelope:
//
//	frame 0 (22 bytes in version 1, 42 from version 2 on):
//	        version u8 | op u8 | id u32 | offset u64 | maxBytes u32 | maxWaitMillis u32
//	        from version 2: log id [16]byte | epoch u32
//	frame 1: stream name (1..255 bytes)
//
// Reply, two frames:
//
//	frame 0 (30 bytes in version 1, 50 from version 2 on):
//	        version u8 (the request's) | status u8 | id u32 | next u64 | oldest u64 | high u64
//	        from version 2: log id [16]byte | epoch u32
//	frame 1: for StatusOK with OpFetch, zero or more whole spool batches as
//	         they lie on disk; for an error status, a UTF-8 message.
const (
	requestHeaderLen = 22
	replyHeaderLen   = 30
	// identityLen is what version 2 adds to both headers: a log id and an
	// epoch.
	identityLen = 16 + 4
	// MaxStreamName is the longest stream name the protocol carries.
	MaxStreamName = 255
	// MaxClientName is the longest consumer or node name a version 4
	// request carries; longer ones are cut.
	MaxClientName = 255
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
	// LogID and Epoch (version 2) say which log and epoch the consumer's
	// position Offset is in: the identity of the log it read from (the
	// zero UUID if unknown) and the epoch of the last record it read
	// before Offset, or NoEpoch to skip the check (see StatusOtherLog,
	// StatusDiverged). Version 1 requests carry neither.
	LogID uuid.UUID
	Epoch uint32
	// Consumer and Node (version 4) name the consumer and the node it
	// runs on, as it tells them (for Server.Clients; nothing is decided
	// by them); "" when it does not. Older requests carry neither.
	Consumer string
	Node     string
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
	// LogID and Epoch (version 2) identify the stream's log and the epoch
	// of the record before Next, so that (LogID, Epoch, Next) is the
	// consumer's position once it has consumed the reply's records; a
	// fetch reply's records all belong to that epoch. Version 1 replies
	// carry neither (the zero UUID and 0).
	LogID uuid.UUID
	Epoch uint32
}

// headerLen returns the header size of a version: base (version 1) plus
// the identity fields from version 2 on.
func headerLen(version uint8, base int) int {
	if version >= 2 {
		return base + identityLen
	}
	return base
}

// appendRequestHeader encodes r's fixed header into dst.
func appendRequestHeader(dst []byte, r *Request) []byte {
	v := versionOr(r.Version)
	b := make([]byte, headerLen(v, requestHeaderLen))
	b[0] = v
	b[1] = byte(r.Op)
	binary.BigEndian.PutUint32(b[2:], r.ID)
	binary.BigEndian.PutUint64(b[6:], r.Offset)
	binary.BigEndian.PutUint32(b[14:], r.MaxBytes)
	binary.BigEndian.PutUint32(b[18:], r.MaxWaitMillis)
	if v >= 2 {
		putIdentity(b[requestHeaderLen:], r.LogID, r.Epoch)
	}
	return append(dst, b...)
}

// putIdentity writes a log id and epoch (identityLen bytes) into b.
func putIdentity(b []byte, id uuid.UUID, epoch uint32) {
	copy(b, id[:])
	binary.BigEndian.PutUint32(b[16:], epoch)
}

// getIdentity reads what putIdentity wrote.
func getIdentity(b []byte) (id uuid.UUID, epoch uint32) {
	copy(id[:], b)
	return id, binary.BigEndian.Uint32(b[16:])
}

// header checks the frame count, version and header size shared by
// requests and replies (what names which, for errors; base is the
// version 1 header size) and returns the header frame.
func header(frames [][]byte, what string, base int) ([]byte, error) {
	if len(frames) != 2 {
		return nil, fmt.Errorf("%w: %s has %d frames, want 2", ErrMalformed, what, len(frames))
	}
	h := frames[0]
	if len(h) == 0 {
		return nil, fmt.Errorf("%w: empty %s header", ErrMalformed, what)
	}
	if h[0] < minProtocolVersion || h[0] > ProtocolVersion {
		return nil, fmt.Errorf("%w: protocol version %d, want %d..%d", ErrMalformed, h[0], minProtocolVersion, ProtocolVersion)
	}
	if size := headerLen(h[0], base); len(h) != size {
		return nil, fmt.Errorf("%w: %s header is %d bytes, want %d", ErrMalformed, what, len(h), size)
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

// EncodeRequest returns the frames of r: from version 4 on with the
// consumer's and the node's name (cut to MaxClientName bytes).
func EncodeRequest(r *Request) [][]byte {
	frames := [][]byte{appendRequestHeader(nil, r), []byte(r.Stream)}
	if versionOr(r.Version) >= 4 {
		frames = append(frames, []byte(clip(r.Consumer, MaxClientName)), []byte(clip(r.Node, MaxClientName)))
	}
	return frames
}

// clip returns s cut to at most n bytes.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// requestFrames is the frame count of a request of version v.
func requestFrames(v uint8) int {
	if v >= 4 {
		return 4
	}
	return 2
}

// DecodeRequest parses the frames of a request (without the ROUTER
// envelope). It never panics on any input.
func DecodeRequest(frames [][]byte) (Request, error) {
	var r Request
	var names [][]byte
	if len(frames) > 0 && len(frames[0]) > 0 {
		if n := requestFrames(frames[0][0]); n > 2 && len(frames) == n {
			frames, names = frames[:2], frames[2:]
		}
	}
	h, err := header(frames, "request", requestHeaderLen)
	if err != nil {
		return r, err
	}
	if want := requestFrames(h[0]); len(names)+2 != want {
		return r, fmt.Errorf("%w: version %d request has %d frames, want %d", ErrMalformed, h[0], len(names)+2, want)
	}
	if len(names) == 2 {
		if len(names[0]) > MaxClientName || len(names[1]) > MaxClientName {
			return r, fmt.Errorf("%w: consumer or node name over %d bytes", ErrMalformed, MaxClientName)
		}
		r.Consumer, r.Node = string(names[0]), string(names[1])
	}
	r.Version = h[0]
	r.Op = Op(h[1])
	if r.Op < OpFetch || r.Op > OpReaders || (r.Op == OpReaders && r.Version < 4) {
		return r, fmt.Errorf("%w: unknown op %d", ErrMalformed, h[1])
	}
	r.ID = binary.BigEndian.Uint32(h[2:])
	r.Offset = binary.BigEndian.Uint64(h[6:])
	r.MaxBytes = binary.BigEndian.Uint32(h[14:])
	r.MaxWaitMillis = binary.BigEndian.Uint32(h[18:])
	if r.Version >= 2 {
		r.LogID, r.Epoch = getIdentity(h[requestHeaderLen:])
	}
	if n := len(frames[1]); n == 0 || n > MaxStreamName {
		return r, fmt.Errorf("%w: stream name of %d bytes", ErrMalformed, n)
	}
	r.Stream = string(frames[1])
	return r, nil
}

// EncodeReply returns the frames of r. Data is not copied.
func EncodeReply(r *Reply) [][]byte {
	v := versionOr(r.Version)
	b := make([]byte, headerLen(v, replyHeaderLen))
	b[0] = v
	b[1] = byte(r.Status)
	binary.BigEndian.PutUint32(b[2:], r.ID)
	binary.BigEndian.PutUint64(b[6:], r.Next)
	binary.BigEndian.PutUint64(b[14:], r.Oldest)
	binary.BigEndian.PutUint64(b[22:], r.High)
	if v >= 2 {
		putIdentity(b[replyHeaderLen:], r.LogID, r.Epoch)
	}
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
	if r.Version >= 2 {
		r.LogID, r.Epoch = getIdentity(h[replyHeaderLen:])
	}
	r.Data = frames[1]
	return r, nil
}
