package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fastmq/fastmq/patterns/group/internal/wire"

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
	rep, err := adminCall(ctx, endpoint, cfg, &wire.Request{Op: wire.OpSeek, ID: 1, Stream: stream, Group: group, Member: "admin",
		Start: startKind(to), StartValue: startValue(to)})
	if err != nil {
		return GroupStats{}, err
	}
	if rep.Status != wire.StatusOK {
		return GroupStats{}, statusError(&rep)
	}
	return Info(ctx, endpoint, stream, group, cfg)
}

// Settings are a group's AckWait, MaxDeliver and Backoff, as
// MemberConfig has them (zero values: the defaults; MaxDeliver -1:
// unlimited). A publisher bounds AckWait to [MinAckWait, MaxAckWait].
type Settings struct {
	AckWait    time.Duration
	MaxDeliver int
	Backoff    []time.Duration
}

// Configure sets the settings of a group of stream on the publisher at
// endpoint (op configure): the only way they change once the group
// exists there (its first fetch set them). It returns the group's state
// after the change. The group must exist on the publisher (a
// *StatusError with StatusUnknown otherwise). It blocks until the
// publisher has written the change, or ctx ends.
func Configure(ctx context.Context, endpoint, stream, group string, set Settings, cfg socket.Config) (GroupStats, error) {
	if set.AckWait < 0 || set.AckWait > MaxAckWait || len(set.Backoff) > wire.MaxBackoff {
		return GroupStats{}, fmt.Errorf("group: configure: AckWait %v (at most %v) or %d backoff values (at most %d)", set.AckWait, MaxAckWait, len(set.Backoff), wire.MaxBackoff)
	}
	maxDeliver := set.MaxDeliver
	switch {
	case maxDeliver == 0:
		maxDeliver = DefaultMaxDeliver
	case maxDeliver < 0:
		maxDeliver = 0
	}
	rep, err := adminCall(ctx, endpoint, cfg, &wire.Request{Op: wire.OpConfigure, ID: 1, Stream: stream, Group: group, Member: "admin",
		AckWaitMillis: uint32(set.AckWait / time.Millisecond), MaxDeliver: uint16(min(maxDeliver, 65535)), Backoff: set.Backoff})
	if err != nil {
		return GroupStats{}, err
	}
	if rep.Status != wire.StatusOK {
		return GroupStats{}, statusError(&rep)
	}
	return Info(ctx, endpoint, stream, group, cfg)
}

// adminCall sends one request to the publisher at endpoint on a DEALER of
// its own and returns the reply.
func adminCall(ctx context.Context, endpoint string, cfg socket.Config, r *wire.Request) (wire.Reply, error) {
	return call1(ctx, endpoint, cfg, r, false)
}

// adminCallRecords is adminCall for a reply that carries records.
func adminCallRecords(ctx context.Context, endpoint string, cfg socket.Config, r *wire.Request) (wire.Reply, error) {
	return call1(ctx, endpoint, cfg, r, true)
}

func call1(ctx context.Context, endpoint string, cfg socket.Config, r *wire.Request, records bool) (wire.Reply, error) {
	cfg.Identity = nil
	sock, err := socket.New(socket.Dealer, cfg)
	if err != nil {
		return wire.Reply{}, err
	}
	defer sock.Close()
	if err := sock.Connect(endpoint); err != nil {
		return wire.Reply{}, err
	}
	if err := sock.Send(ctx, socket.Msg{Frames: wire.EncodeRequest(r)}); err != nil {
		return wire.Reply{}, err
	}
	msg, err := sock.Recv(ctx)
	if err != nil {
		return wire.Reply{}, err
	}
	rep, err := wire.DecodeReply(msg.Frames, records)
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
	rep, err := adminCall(ctx, endpoint, cfg, &wire.Request{Op: wire.OpList, ID: 1, Stream: stream, Group: "*", Member: "admin"})
	if err != nil {
		return nil, err
	}
	if rep.Status != wire.StatusOK {
		return nil, statusError(&rep)
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
	rep, err := adminCallRecords(ctx, endpoint, cfg, &wire.Request{Op: wire.OpDLQ, ID: 1, Stream: stream, Group: group, Member: "admin",
		StartValue: from, MaxRecords: uint32(max)})
	if err != nil {
		return nil, err
	}
	if rep.Status != wire.StatusOK {
		return nil, statusError(&rep)
	}
	return deadLetters(rep.Records), nil
}

// Replay asks the publisher at endpoint to give the dead letters of a
// group of stream back to that group: those at offsets [from, from+count)
// of its dead-letter stream (to its end when count is 0) have their
// records made pending again in the group's state, at their own offsets
// with their own id and headers, so that only this group gets them again.
// Dead letters replayed before are skipped (the group's state keeps which,
// written with the reopened records), so replaying a range twice, or
// again after a crash, replays it once. It blocks until the publisher has
// written the change, or ctx ends.
func Replay(ctx context.Context, endpoint, stream, group string, from uint64, count uint32, cfg socket.Config) (ReplayResult, error) {
	var res ReplayResult
	rep, err := adminCall(ctx, endpoint, cfg, &wire.Request{Op: wire.OpReplay, ID: 1, Stream: stream, Group: group, Member: "admin",
		StartValue: from, MaxRecords: count})
	if err != nil {
		return res, err
	}
	if rep.Status != wire.StatusOK {
		return res, statusError(&rep)
	}
	if err := json.Unmarshal(rep.Data, &res); err != nil {
		return res, fmt.Errorf("group: replay reply: %w", err)
	}
	return res, nil
}

// ErrNoDeadLetters is an Admin's answer for a publisher that knows the
// group but holds no dead letters of it.
var ErrNoDeadLetters = errors.New("group: no dead letters")

// Publisher is a publisher an Admin asks: its name (a node name, for the
// results) and the endpoint of its spool server.
type Publisher struct {
	Name     string
	Endpoint string
}

// AdminConfig configures an Admin.
type AdminConfig struct {
	// Publishers returns the publishers to ask about stream (AllStreams:
	// about every stream), in the order the results should have. An error
	// (none found, say) ends the Admin call with it. Required.
	Publishers func(ctx context.Context, stream string) ([]Publisher, error)
	// Socket configures the DEALER socket of each request.
	Socket socket.Config
	// Timeout bounds each request to one publisher. Default 10 s.
	Timeout time.Duration
}

// Admin asks every publisher of a stream about its groups: each publisher
// keeps the state of the groups of its own records, so a question about a
// group is a question to each. Its methods ask the publishers at once and
// return one Result per publisher, in the order AdminConfig.Publishers
// gave them; a publisher that fails (down, or refusing) has its error in
// its Result and does not fail the others. An Admin holds no resources (a
// request opens a socket of its own) and is safe for concurrent use; its
// methods block until every publisher answered or its request timed out.
type Admin struct {
	cfg AdminConfig
}

// Result is one publisher's answer to an Admin call: Value when Err is nil.
type Result[T any] struct {
	Publisher Publisher
	Value     T
	Err       error
}

// NewAdmin returns an Admin.
func NewAdmin(cfg AdminConfig) (*Admin, error) {
	if cfg.Publishers == nil {
		return nil, errors.New("group: admin needs Publishers")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	return &Admin{cfg: cfg}, nil
}

// askAll calls ask for every publisher of stream at once and returns
// their results in the publishers' order. ask bounds each of its requests
// with a.timeout.
func askAll[T any](ctx context.Context, a *Admin, stream string, ask func(ctx context.Context, p Publisher) (T, error)) ([]Result[T], error) {
	pubs, err := a.cfg.Publishers(ctx, stream)
	if err != nil {
		return nil, err
	}
	out := make([]Result[T], len(pubs))
	var wg sync.WaitGroup
	for i, p := range pubs {
		out[i].Publisher = p
		wg.Go(func() { out[i].Value, out[i].Err = ask(ctx, p) })
	}
	wg.Wait()
	return out, nil
}

// timeout returns ctx bounded by the request timeout.
func (a *Admin) timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.cfg.Timeout)
}

// List asks every publisher of stream (AllStreams: every publisher) for
// its groups of stream (see List).
func (a *Admin) List(ctx context.Context, stream string) ([]Result[[]GroupStats], error) {
	return askAll(ctx, a, stream, func(ctx context.Context, p Publisher) ([]GroupStats, error) {
		ctx, cancel := a.timeout(ctx)
		defer cancel()
		return List(ctx, p.Endpoint, stream, a.cfg.Socket)
	})
}

// Info asks every publisher of stream for the state of group (see Info):
// a publisher that does not know it answers a *StatusError with
// StatusUnknown.
func (a *Admin) Info(ctx context.Context, stream, group string) ([]Result[GroupStats], error) {
	return askAll(ctx, a, stream, func(ctx context.Context, p Publisher) (GroupStats, error) {
		ctx, cancel := a.timeout(ctx)
		defer cancel()
		return Info(ctx, p.Endpoint, stream, group, a.cfg.Socket)
	})
}

// Seek moves the cursor of group on every publisher of stream to to (see
// Seek: each publisher has offsets of its own) and returns the group's
// state on each after the move.
func (a *Admin) Seek(ctx context.Context, stream, group string, to spool.Start) ([]Result[GroupStats], error) {
	return askAll(ctx, a, stream, func(ctx context.Context, p Publisher) (GroupStats, error) {
		ctx, cancel := a.timeout(ctx)
		defer cancel()
		return Seek(ctx, p.Endpoint, stream, group, to, a.cfg.Socket)
	})
}

// Configure sets the settings of group on every publisher of stream (see
// Configure) and returns the group's state on each after the change.
func (a *Admin) Configure(ctx context.Context, stream, group string, set Settings) ([]Result[GroupStats], error) {
	return askAll(ctx, a, stream, func(ctx context.Context, p Publisher) (GroupStats, error) {
		ctx, cancel := a.timeout(ctx)
		defer cancel()
		return Configure(ctx, p.Endpoint, stream, group, set, a.cfg.Socket)
	})
}

// DeadLetters reads, from every publisher of stream, up to max dead
// letters of group from offset from of its dead-letter stream there (see
// DeadLetters; in requests of at most 1000, each bounded by the request
// timeout). A publisher that knows the group but holds no dead letters of
// it answers ErrNoDeadLetters; one that does not know the group, a
// *StatusError with StatusUnknown.
func (a *Admin) DeadLetters(ctx context.Context, stream, group string, from uint64, max int) ([]Result[[]Record], error) {
	return askAll(ctx, a, stream, func(ctx context.Context, p Publisher) ([]Record, error) {
		var out []Record
		for next := from; len(out) < max; {
			rctx, cancel := a.timeout(ctx)
			recs, err := DeadLetters(rctx, p.Endpoint, stream, group, next, min(max-len(out), 1000), a.cfg.Socket)
			cancel()
			if err != nil && next == from && isUnknown(err) {
				return nil, a.noDeadLetters(ctx, p, stream, group)
			}
			if err != nil {
				return out, err
			}
			out = append(out, recs...)
			if len(recs) == 0 {
				break
			}
			next = recs[len(recs)-1].Offset + 1
		}
		return out, nil
	})
}

// Replay gives the dead letters of group on every publisher of stream
// back to the group (see Replay). A publisher that knows the group but
// holds no dead letters of it answers ErrNoDeadLetters; one that does not
// know the group, a *StatusError with StatusUnknown.
func (a *Admin) Replay(ctx context.Context, stream, group string, from uint64, count uint32) ([]Result[ReplayResult], error) {
	return askAll(ctx, a, stream, func(ctx context.Context, p Publisher) (ReplayResult, error) {
		rctx, cancel := a.timeout(ctx)
		res, err := Replay(rctx, p.Endpoint, stream, group, from, count, a.cfg.Socket)
		cancel()
		if isUnknown(err) {
			return res, a.noDeadLetters(ctx, p, stream, group)
		}
		return res, err
	})
}

// noDeadLetters tells, for a publisher without a dead-letter stream of
// group, whether it knows the group (ErrNoDeadLetters) or not (Info's
// *StatusError with StatusUnknown, or another error of Info).
func (a *Admin) noDeadLetters(ctx context.Context, p Publisher, stream, group string) error {
	ctx, cancel := a.timeout(ctx)
	defer cancel()
	if _, err := Info(ctx, p.Endpoint, stream, group, a.cfg.Socket); err != nil {
		return err
	}
	return ErrNoDeadLetters
}

// isUnknown tells a publisher's StatusUnknown.
func isUnknown(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Status == StatusUnknown
}
