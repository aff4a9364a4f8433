package group

import (
	"errors"
	"fmt"
	"time"

	"github.com/fastmq/fastmq/patterns/group/internal/durable"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/spool"
)

// Status is the status of a publisher's answer that a *StatusError
// carries.
type Status uint8

// Error statuses of a publisher's answers (see the package doc,
// "Protocol").
const (
	StatusUnknown     Status = 1 // unknown stream or group
	StatusBadRequest  Status = 4 // malformed request
	StatusInternal    Status = 5 // the publisher failed (e.g. could not write the state)
	StatusUnavailable Status = 6 // server closing, or the member id is bound to another connection
	// StatusLimitReached: the group has its most members on the
	// publisher (ServerConfig.MaxMembers), or its client has its most
	// (ServerConfig.MemberLimit); the member asks again later.
	StatusLimitReached Status = 8
	StatusForbidden    Status = 9  // the client may not read the stream (the spool server's ACL)
	StatusUnsupported  Status = 11 // the publisher speaks another version of the group protocol
)

// StatusError is an error status from a publisher.
type StatusError struct {
	Status Status
	Msg    string
}

// statusError returns rep's error status as a *StatusError.
func statusError(rep *wire.Reply) *StatusError {
	return &StatusError{Status: Status(rep.Status), Msg: string(rep.Data)}
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("group: publisher answered status %d: %s", e.Status, e.Msg)
}

// Is makes a StatusForbidden error match ErrForbidden.
func (e *StatusError) Is(target error) bool {
	return target == ErrForbidden && e.Status == StatusForbidden
}

// ErrForbidden matches the error of a publisher whose spool server does
// not let this member read the stream (StatusForbidden): the member stops
// fetching from that publisher and Next returns the error once.
var ErrForbidden = errors.New("group: forbidden")

// ErrJournalDamaged is wrapped by the errors of a group's journal that
// is damaged other than at its tail (a torn last entry is expected after
// a crash and is not an error), or whose entries do not fit the
// snapshot: the Server logs them and answers StatusInternal.
var ErrJournalDamaged = durable.ErrJournalDamaged

// ErrMalformed is wrapped by the errors of a publisher's answer that
// does not decode.
var ErrMalformed = wire.ErrMalformed

// Refusal codes of a *RefusedError.
const (
	RefusedNotLeased uint8 = 1 // no lease of this member on the offset with that delivery
	RefusedUnknown   uint8 = 2 // offset outside the group's window (acknowledged or never leased)
)

// Start positions of a new group (MemberConfig.Start) and of a seek
// (Position).
const (
	StartEarliest uint8 = 0
	StartLatest   uint8 = 1
	StartOffset   uint8 = 2
	StartTime     uint8 = 3 // start value is Unix nanoseconds
)

// Header is a record header, as the spool keeps it.
type Header = spool.Header

// Record is a dead letter as DeadLetters returns it.
type Record struct {
	Offset   uint64
	Delivery uint32
	Time     time.Time
	Headers  []Header
	Value    []byte
}

// deadLetters returns the records of a dead-letter reply as Records.
func deadLetters(recs []wire.Record) []Record {
	var out []Record
	for _, r := range recs {
		out = append(out, Record(r))
	}
	return out
}

// RefusedError is a settle the publisher refused: the member does not
// hold that lease (it ran out and the record moved on, or it was settled).
type RefusedError struct {
	Offset uint64
	Code   uint8
}

func (e *RefusedError) Error() string {
	if e.Code == RefusedUnknown {
		return fmt.Sprintf("group: offset %d is not pending in the group (already settled, or never leased)", e.Offset)
	}
	return fmt.Sprintf("group: the lease of offset %d is not held by this member (it ran out)", e.Offset)
}

// ErrRefused is matched by every *RefusedError.
var ErrRefused = errors.New("group: refused")

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }
