package group

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/fastmq/fastmq/patterns/group/internal/wire"
)

// Message is one leased record. Its methods are safe for concurrent use;
// the first of Ack, Nak and Term settles the lease, later ones fail.
type Message struct {
	Publisher string // the node that leased it
	Offset    uint64
	Delivery  uint32 // 1 the first time
	Time      time.Time
	Headers   []Header
	Value     []byte

	ln *link // the link that leased it (its member: ln.m)
}

// linkOf returns the link msg came by while that runs (no lock: Run asks
// for every record), else the member's link to its publisher now, nil
// when there is none.
func (msg *Message) linkOf() *link {
	ln := msg.ln
	if ln == nil {
		return nil // not a member's message
	}
	if ln.ctx.Err() == nil {
		return ln
	}
	return ln.m.link(msg.Publisher)
}

// Ack acknowledges the record; it returns once the publisher has written
// the acknowledgement to disk. A refused ack (the lease ran out and moved)
// gives a *RefusedError.
func (msg *Message) Ack(ctx context.Context) error { return msg.settle(ctx, wire.OpAck, 0, "") }

// Nak asks for redelivery after delay (0: the group's backoff).
func (msg *Message) Nak(ctx context.Context, delay time.Duration) error {
	return msg.settle(ctx, wire.OpNak, delay, "")
}

// NakWithReason is Nak that tells the publisher why: the reason (its
// first 255 bytes) is kept in the record's delivery history and, if the
// record becomes a dead letter, in its HeaderDLQLastReason and
// HeaderDLQHistory headers.
func (msg *Message) NakWithReason(ctx context.Context, delay time.Duration, reason string) error {
	return msg.settle(ctx, wire.OpNak, delay, clipReason(reason))
}

// clipReason cuts a reason to the 255 bytes a settle entry carries, at a
// UTF-8 boundary.
func clipReason(s string) string {
	if len(s) <= 255 {
		return s
	}
	s = s[:255]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// InProgress extends the lease by AckWait.
func (msg *Message) InProgress(ctx context.Context) error {
	return msg.settle(ctx, wire.OpProgress, 0, "")
}

// Term gives up on the record: it goes to the dead-letter stream with
// reason.
func (msg *Message) Term(ctx context.Context, reason string) error {
	return msg.settle(ctx, wire.OpTerm, 0, clipReason(reason))
}

func (msg *Message) settle(ctx context.Context, op wire.Op, delay time.Duration, reason string) error {
	if msg.ln == nil {
		return errors.New("group: settle of a message no member leased")
	}
	ln := msg.ln.m.link(msg.Publisher)
	if ln == nil {
		return fmt.Errorf("group: publisher %s is gone; the lease of %d will be released", msg.Publisher, msg.Offset)
	}
	return ln.settle(ctx, op, wire.Entry{Offset: msg.Offset, Delivery: msg.Delivery, Delay: delay, Reason: reason})
}
