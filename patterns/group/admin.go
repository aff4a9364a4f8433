package group

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fastmq/fastmq/socket"
)

// Position is where Seek moves a group's cursor: one of StartEarliest,
// StartLatest, StartOffset (Value an offset) and StartTime (Value Unix
// nanoseconds).
type Position struct {
	Start uint8
	Value uint64
}

// Earliest is the oldest record the publisher holds.
func Earliest() Position { return Position{Start: StartEarliest} }

// Latest is the publisher's next offset: only records appended later.
func Latest() Position { return Position{Start: StartLatest} }

// AtOffset is offset o (held within what the publisher holds).
func AtOffset(o uint64) Position { return Position{Start: StartOffset, Value: o} }

// AtTime is the first record at or after t.
func AtTime(t time.Time) Position { return Position{Start: StartTime, Value: uint64(t.UnixNano())} }

// Seek moves the cursor of a group of stream on the publisher at endpoint
// to pos (op seek, see the package doc): the group's leases and pending
// redeliveries there are dropped, the records before pos count as settled
// and those from pos on are delivered again. It returns the group's state
// after the move. The group must exist on the publisher (a *StatusError
// with StatusUnknown otherwise). It blocks until the publisher has written
// the moved state, or ctx ends.
func Seek(ctx context.Context, endpoint, stream, group string, pos Position, cfg socket.Config) (GroupStats, error) {
	if pos.Start > StartTime {
		return GroupStats{}, fmt.Errorf("group: unknown start %d", pos.Start)
	}
	rep, err := adminCall(ctx, endpoint, cfg, &Request{Op: OpSeek, ID: 1, Stream: stream, Group: group, Member: "admin",
		Start: pos.Start, StartValue: pos.Value})
	if err != nil {
		return GroupStats{}, err
	}
	if rep.Status != StatusOK {
		return GroupStats{}, &StatusError{Status: rep.Status, Msg: string(rep.Data)}
	}
	return Info(ctx, endpoint, stream, group, cfg)
}

// adminCall sends one request to the publisher at endpoint on a DEALER of
// its own and returns the reply.
func adminCall(ctx context.Context, endpoint string, cfg socket.Config, r *Request) (Reply, error) {
	cfg.Identity = nil
	sock, err := socket.New(socket.Dealer, cfg)
	if err != nil {
		return Reply{}, err
	}
	defer sock.Close()
	if err := sock.Connect(endpoint); err != nil {
		return Reply{}, err
	}
	if err := sock.Send(ctx, socket.Msg{Frames: EncodeRequest(r)}); err != nil {
		return Reply{}, err
	}
	msg, err := sock.Recv(ctx)
	if err != nil {
		return Reply{}, err
	}
	rep, err := DecodeReply(msg.Frames, false)
	if err != nil {
		return rep, err
	}
	if rep.ID != r.ID {
		return rep, errors.New("group: reply to another request")
	}
	return rep, nil
}
