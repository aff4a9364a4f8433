package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// startKind is a start position's kind on the wire (Request.Start).
func startKind(s spool.Start) uint8 {
	switch s.Kind {
	case spool.StartLatest:
		return StartLatest
	case spool.StartOffset:
		return StartOffset
	case spool.StartTime:
		return StartTime
	}
	return StartEarliest
}

// startValue is a start position's value on the wire (Request.StartValue):
// the offset, or the time in Unix nanoseconds.
func startValue(s spool.Start) uint64 {
	switch s.Kind {
	case spool.StartOffset:
		return s.Offset
	case spool.StartTime:
		return uint64(s.Time.UnixNano())
	}
	return 0
}

// Seek moves the cursor of a group of stream on the publisher at endpoint
// to (op seek, see the package doc): the group's leases and pending
// redeliveries there are dropped, the records before pos count as settled
// and those from pos on are delivered again. It returns the group's state
// after the move. The group must exist on the publisher (a *StatusError
// with StatusUnknown otherwise). It blocks until the publisher has written
// the moved state, or ctx ends.
func Seek(ctx context.Context, endpoint, stream, group string, to spool.Start, cfg socket.Config) (GroupStats, error) {
	if to.Kind > spool.StartTime {
		return GroupStats{}, fmt.Errorf("group: unknown start kind %d", to.Kind)
	}
	rep, err := adminCall(ctx, endpoint, cfg, &Request{Op: OpSeek, ID: 1, Stream: stream, Group: group, Member: "admin",
		Start: startKind(to), StartValue: startValue(to)})
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
	return call1(ctx, endpoint, cfg, r, false)
}

// adminCallRecords is adminCall for a reply that carries records.
func adminCallRecords(ctx context.Context, endpoint string, cfg socket.Config, r *Request) (Reply, error) {
	return call1(ctx, endpoint, cfg, r, true)
}

func call1(ctx context.Context, endpoint string, cfg socket.Config, r *Request, records bool) (Reply, error) {
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
	rep, err := DecodeReply(msg.Frames, records)
	if err != nil {
		return rep, err
	}
	if rep.ID != r.ID {
		return rep, errors.New("group: reply to another request")
	}
	return rep, nil
}

// List asks the publisher at endpoint for the state of every group of
// stream it has (AllStreams: of every stream), sorted by stream and group.
// It blocks until the answer comes or ctx ends.
func List(ctx context.Context, endpoint, stream string, cfg socket.Config) ([]GroupStats, error) {
	rep, err := adminCall(ctx, endpoint, cfg, &Request{Op: OpList, ID: 1, Stream: stream, Group: "*", Member: "admin"})
	if err != nil {
		return nil, err
	}
	if rep.Status != StatusOK {
		return nil, &StatusError{Status: rep.Status, Msg: string(rep.Data)}
	}
	var out []GroupStats
	if err := json.Unmarshal(rep.Data, &out); err != nil {
		return nil, fmt.Errorf("group: list reply: %w", err)
	}
	return out, nil
}

// DeadLetters reads up to max dead letters of a group of stream (at most
// 4096 at a time) from offset from of its dead-letter stream on the
// publisher at endpoint. Each record's Offset is its offset in the
// dead-letter stream and its headers hold the HeaderDLQ ones. Fewer than
// max records: the end of the dead-letter stream. A group without dead
// letters there gives a *StatusError with StatusUnknown. It blocks until
// the answer comes or ctx ends.
func DeadLetters(ctx context.Context, endpoint, stream, group string, from uint64, max int, cfg socket.Config) ([]Record, error) {
	rep, err := adminCallRecords(ctx, endpoint, cfg, &Request{Op: OpDLQ, ID: 1, Stream: stream, Group: group, Member: "admin",
		StartValue: from, MaxRecords: uint32(max)})
	if err != nil {
		return nil, err
	}
	if rep.Status != StatusOK {
		return nil, &StatusError{Status: rep.Status, Msg: string(rep.Data)}
	}
	return rep.Records, nil
}

// Replay asks the publisher at endpoint to append the dead letters of a
// group of stream back to stream: those at offsets [from, from+count) of
// its dead-letter stream (to its end when count is 0), with their headers
// minus the dead-letter ones. Dead letters replayed before are skipped
// (the publisher keeps which), so replaying a range twice appends it once.
// It blocks until the records are appended or ctx ends.
func Replay(ctx context.Context, endpoint, stream, group string, from uint64, count uint32, cfg socket.Config) (ReplayResult, error) {
	var res ReplayResult
	rep, err := adminCall(ctx, endpoint, cfg, &Request{Op: OpReplay, ID: 1, Stream: stream, Group: group, Member: "admin",
		StartValue: from, MaxRecords: count})
	if err != nil {
		return res, err
	}
	if rep.Status != StatusOK {
		return res, &StatusError{Status: rep.Status, Msg: string(rep.Data)}
	}
	if err := json.Unmarshal(rep.Data, &res); err != nil {
		return res, fmt.Errorf("group: replay reply: %w", err)
	}
	return res, nil
}
