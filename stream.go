package fastmq

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fastmq/fastmq/internal/streams"
	"github.com/fastmq/fastmq/spool"
)

// StreamSyncInterval is the least time between the starts of two of a
// node's stream's fdatasyncs, unless Config.Spool.MinSyncInterval says
// otherwise (spool.Config.MinSyncInterval; under Spool.VisibleBeforeSync
// the spool's EarlySyncInterval). Back to back, a stream of small appends
// at a steady rate costs more fdatasyncs a second than a virtual or cloud
// disk gives (enough to stall a whole VM), while consumer groups, which
// lease records once written, do not wait for them. It caps a publisher
// that waits for each acknowledgement before the next at about 1700
// publishes a second per stream (PublishAsync, or several publishers,
// batch into one fdatasync). docs/performance.md has the measurements.
const StreamSyncInterval = 500 * time.Microsecond

// ErrBadStreamName reports a stream name that cannot be used.
var ErrBadStreamName = streams.ErrBadName

// ErrStreamDamaged reports an append to a stream whose spool is damaged in
// the middle (a spool.CorruptError, which the error wraps too): the node
// serves it read-only, up to the damage, until it is repaired
// (spool.Repair).
var ErrStreamDamaged = streams.ErrDamaged

// Stream opens (creating if needed) the local spool of a stream, serves it
// and advertises it. Calling it again returns the same log. The node owns
// the log: do not Close it. A stream on disk that would not open gives its
// error each time, after trying again (it may have been repaired); one
// damaged in the middle, which the node serves read-only up to the damage,
// an error wrapping ErrStreamDamaged and the spool.CorruptError.
func (n *Node) Stream(name string) (*spool.Log, error) {
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	return n.streams.Get(name)
}

// openLog opens the writer's spool of stream name under the node's spool
// config.
func (n *Node) openLog(name string) (*spool.Log, error) {
	scfg := n.cfg.Spool
	scfg.Dir = filepath.Join(n.cfg.DataDir, "streams", name)
	if scfg.GroupInterval == 0 {
		scfg.GroupInterval = -1
	}
	if scfg.MinSyncInterval == 0 && !scfg.VisibleBeforeSync {
		scfg.MinSyncInterval = StreamSyncInterval
	}
	if scfg.Logger == nil {
		scfg.Logger = n.cfg.Logger
	}
	if n.cfg.Interest.Retain {
		scfg.RetentionFloor = n.interestFloor(name)
	}
	l, err := spool.Open(scfg)
	if err != nil {
		return nil, fmt.Errorf("fastmq: open stream %q: %w", name, err)
	}
	return l, nil
}

// Streams returns the names of the node's open streams, sorted (not the
// damaged ones, served read-only: see Status).
func (n *Node) Streams() []string { return n.streams.Names() }

// Publish appends one record with value to the local spool of stream and
// returns its offset once it is durable under the spool's sync policy.
// Consumers anywhere in the mesh pull it from here.
//
// Publish is idempotent with a deduplication header among headers:
// spool.MsgID(id) (a repeat within the stream's window appends nothing)
// or spool.ProducerSeq(producer, seq) (exact, per numbered producer). A
// repeat returns the first record's offset and an error matching
// spool.ErrDuplicate; a producer's gap one matching spool.ErrSequence. The
// same holds for PublishAsync (through Ack.Wait) and Append.
func (n *Node) Publish(ctx context.Context, stream string, value []byte, headers ...spool.Header) (uint64, error) {
	return n.Append(ctx, stream, spool.Record{Value: value, Headers: headers})
}

// PublishAsync queues one record with value for the local spool of stream
// and returns at once, with an Ack that completes when the record is
// durable under the spool's sync policy (Ack.Wait gives its offset), as
// JetStream's PublishAsync. It blocks only while the spool's queue is full
// or until ctx ends. The caller must not modify value or headers until the
// Ack is done. One goroutine can keep many records in flight this way, so
// one fsync covers them all: a loop of Publish calls waits for an fsync per
// record; a loop of PublishAsync calls, then a wait on the last Ack, does
// not (Acks complete in order).
func (n *Node) PublishAsync(ctx context.Context, stream string, value []byte, headers ...spool.Header) (*spool.Ack, error) {
	if err := n.guard.Allow(); err != nil {
		return nil, err
	}
	l, err := n.Stream(stream)
	if err != nil {
		return nil, err
	}
	return l.AppendAsync(ctx, spool.Record{Value: value, Headers: headers})
}

// Append appends records to the local spool of stream and returns the
// offset of the first, once they are durable under the sync policy. While
// the node's disk guard refuses appends (see DiskGuard), it returns an
// error wrapping ErrDiskFull that names the limit, and writes nothing.
func (n *Node) Append(ctx context.Context, stream string, recs ...spool.Record) (uint64, error) {
	if err := n.guard.Allow(); err != nil {
		return 0, err
	}
	l, err := n.Stream(stream)
	if err != nil {
		return 0, err
	}
	return l.Append(ctx, recs...)
}
