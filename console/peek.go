package console

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/spool"
)

// ErrNoStream reports a stream the node does not hold.
var ErrNoStream = errors.New("fastmq: no such stream")

// Peek reads up to limit records of a local stream of n from offset from
// (the oldest retained one if from is older), without consuming anything:
// no offset is committed anywhere. It returns the records and the offset
// after the last one (where the next page starts). It does not wait for
// records at the tail, and returns ErrNoStream, without creating the
// stream, when n does not hold it.
func Peek(ctx context.Context, n *fastmq.Node, stream string, from uint64, limit int) ([]spool.Record, uint64, error) {
	l, ok := n.LookupStream(stream)
	if !ok {
		return nil, from, fmt.Errorf("%w: %q", ErrNoStream, stream)
	}
	from = max(from, l.OldestOffset())
	end := l.NextOffset()
	if limit <= 0 || from >= end {
		return nil, from, nil
	}
	r, err := l.NewReader(from)
	if err != nil {
		return nil, from, err
	}
	defer r.Close()
	var recs []spool.Record
	next := from
	for len(recs) < limit && r.Offset() < end {
		rec, err := r.Next(ctx)
		if err != nil {
			return recs, next, fmt.Errorf("fastmq: peek %q at %d: %w", stream, r.Offset(), err)
		}
		recs = append(recs, rec)
		next = rec.Offset + 1
	}
	return recs, next, nil
}

// OffsetAt returns the first offset of a local stream of n whose record
// time is at or after t (the stream's next offset when there is none), for
// a peek by time. It returns ErrNoStream when n does not hold the stream.
func OffsetAt(n *fastmq.Node, stream string, t time.Time) (uint64, error) {
	l, ok := n.LookupStream(stream)
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrNoStream, stream)
	}
	return l.SeekTime(t)
}
