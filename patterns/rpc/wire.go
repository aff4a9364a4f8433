package rpc

import (
	"encoding/binary"
	"errors"
	"strconv"
	"time"
)

// Wire constants; doc.go describes the format.
const (
	magic0, magic1, magic2 = 'F', 'M', 'Q'
	wireVersion            = 1

	typeRequest = 'Q'
	typeReply   = 'R'

	flagKey = 1 << 0 // the request carries an idempotency key

	reqHeaderMin = 23 // magic, version, type, flags, id, timeout, client id length
	repHeaderLen = 14 // magic, version, type, status, id

	// MaxClientID is the longest client id a request may carry.
	MaxClientID = 64
	// MaxKey is the longest idempotency key a request may carry.
	MaxKey = 255
)

// Status is the outcome a reply reports.
type Status byte

// Reply statuses. Only StatusOK and StatusError mean the handler ran.
const (
	StatusOK          Status = 0 // the handler returned a reply
	StatusError       Status = 1 // the handler returned an error: frames code, message
	StatusUnavailable Status = 2 // the server is shutting down; the handler did not run
	StatusOverloaded  Status = 3 // the server's queue is full; the handler did not run
	StatusBadRequest  Status = 4 // the request was malformed; the handler did not run
)

// String returns the status name.
func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusError:
		return "error"
	case StatusUnavailable:
		return "unavailable"
	case StatusOverloaded:
		return "overloaded"
	case StatusBadRequest:
		return "bad-request"
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// errNotFastMQ says a frame is not a FastMQ header: the request comes from
// a plain REQ client.
var errNotFastMQ = errors.New("rpc: not a fastmq header")

// request is a decoded request header.
type request struct {
	id       uint64
	timeout  time.Duration // 0: none
	clientID []byte        // aliases the frame
	key      []byte        // aliases the frame; nil: none
}

// isHeader reports whether b starts with the FastMQ magic and version.
func isHeader(b []byte) bool {
	return len(b) >= 5 && b[0] == magic0 && b[1] == magic1 && b[2] == magic2 && b[3] == wireVersion
}

// appendRequest appends the header of a request to dst.
func appendRequest(dst []byte, r request) []byte {
	flags := byte(0)
	if r.key != nil {
		flags |= flagKey
	}
	dst = append(dst, magic0, magic1, magic2, wireVersion, typeRequest, flags)
	dst = binary.BigEndian.AppendUint64(dst, r.id)
	dst = binary.BigEndian.AppendUint64(dst, uint64(max(r.timeout, 0)))
	dst = append(dst, byte(len(r.clientID)))
	dst = append(dst, r.clientID...)
	if r.key != nil {
		dst = append(dst, byte(len(r.key)))
		dst = append(dst, r.key...)
	}
	return dst
}

// decodeRequest decodes a request header. It returns errNotFastMQ when b
// does not start with the magic, another error when it does but is
// malformed. The slices in the result alias b.
func decodeRequest(b []byte) (request, error) {
	var r request
	if !isHeader(b) {
		return r, errNotFastMQ
	}
	if len(b) < reqHeaderMin || b[4] != typeRequest {
		return r, errors.New("rpc: malformed request header")
	}
	flags := b[5]
	if flags&^flagKey != 0 {
		return r, errors.New("rpc: unknown request flags")
	}
	r.id = binary.BigEndian.Uint64(b[6:])
	t := binary.BigEndian.Uint64(b[14:])
	if t > uint64(365*24*time.Hour) {
		return r, errors.New("rpc: request timeout out of range")
	}
	r.timeout = time.Duration(t)
	n := int(b[22])
	rest := b[23:]
	if n == 0 || n > MaxClientID || len(rest) < n {
		return r, errors.New("rpc: malformed client id")
	}
	r.clientID, rest = rest[:n:n], rest[n:]
	if flags&flagKey != 0 {
		if len(rest) < 1 {
			return r, errors.New("rpc: missing idempotency key")
		}
		k := int(rest[0])
		rest = rest[1:]
		if k == 0 || len(rest) < k {
			return r, errors.New("rpc: malformed idempotency key")
		}
		r.key, rest = rest[:k:k], rest[k:]
	}
	if len(rest) != 0 {
		return r, errors.New("rpc: trailing bytes in request header")
	}
	return r, nil
}

// appendReply appends a reply header to dst.
func appendReply(dst []byte, id uint64, st Status) []byte {
	dst = append(dst, magic0, magic1, magic2, wireVersion, typeReply, byte(st))
	return binary.BigEndian.AppendUint64(dst, id)
}

// decodeReply decodes a reply header.
func decodeReply(b []byte) (id uint64, st Status, err error) {
	if !isHeader(b) || len(b) != repHeaderLen || b[4] != typeReply {
		return 0, 0, errors.New("rpc: malformed reply header")
	}
	return binary.BigEndian.Uint64(b[6:]), Status(b[5]), nil
}

// splitEnvelope splits a message a ROUTER received into its envelope (the
// routing frames up to and including the empty delimiter) and its body.
// ok is false when there is no delimiter.
func splitEnvelope(frames [][]byte) (env, body [][]byte, ok bool) {
	for i, f := range frames {
		if len(f) == 0 {
			if i == 0 {
				return nil, nil, false // no routing id
			}
			return frames[: i+1 : i+1], frames[i+1:], true
		}
	}
	return nil, nil, false
}
