package fastmq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/fastmq/fastmq/spool"
)

// StreamSyncInterval is the least time between the starts of two of a
// node's stream's fdatasyncs, unless Config.Spool.MinSyncInterval says
// otherwise (spool.Config.MinSyncInterval; under Spool.VisibleBeforeSync
// the spool's EarlySyncInterval). Back to back, a stream of small
// appends at a steady rate costs an fdatasync every 0.15-0.3 ms, which is
// more I/O operations a second than a virtual or cloud disk gives (on a
// 2-core VM, over about 2500 a second froze the whole VM for 10 ms in
// every 100), and consumer groups, which lease records once written,
// do not wait for them. Paced at 500 µs, at 10 K records/s: append to
// group delivery p99 0.55-0.94 ms against 1.75-2.25 ms back to back, and
// the publish acknowledgement's p99 1.6-2.0 ms against 4.6-6.2 ms, for a
// p50 of 0.58 ms against 0.25 ms. It caps a publisher that waits for
// each acknowledgement before the next at about 1700 publishes a second
// per stream, against 5500-6300 back to back (PublishAsync, or several
// publishers, batch into the same fdatasync).
const StreamSyncInterval = 500 * time.Microsecond

// ErrBadStreamName reports a stream name that cannot be used.
var ErrBadStreamName = errors.New("fastmq: bad stream name")

// ErrStreamDamaged reports an append to a stream whose spool is damaged in
// the middle (a spool.CorruptError, which the error wraps too): the node
// serves it read-only, up to the damage, until it is repaired
// (spool.Repair).
var ErrStreamDamaged = errors.New("fastmq: stream damaged")

var streamNameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

func (n *Node) lookupStream(name string) (*spool.Log, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l, ok := n.streams[name]
	if !ok {
		l, ok = n.damaged[name]
	}
	return l, ok
}

// Stream opens (creating if needed) the local spool of a stream, serves it
// and advertises it. Calling it again returns the same log. The node owns
// the log: do not Close it. A stream on disk that would not open gives its
// error each time, after trying again (it may have been repaired); one
// damaged in the middle, which the node serves read-only up to the damage,
// an error wrapping ErrStreamDamaged and the spool.CorruptError.
func (n *Node) Stream(name string) (*spool.Log, error) {
	n.mu.Lock()
	l, ok := n.streams[name] // only valid names are ever in the map
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if ok {
		return l, nil
	}
	if !streamNameRE.MatchString(name) {
		return nil, fmt.Errorf("%w: %q (want 1-128 of letters, digits, '.', '_', '-')", ErrBadStreamName, name)
	}
	// Opening recovers the spool and re-advertises: slow work done
	// outside n.mu, so serving other streams goes on meanwhile.
	n.openMu.Lock()
	defer n.openMu.Unlock()
	n.mu.Lock()
	closed = n.closed
	l, ok = n.streams[name]
	names := n.servedNamesLocked()
	n.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if ok {
		return l, nil
	}
	l, err := n.openLog(name)
	if err != nil {
		n.mu.Lock()
		n.failed[name] = err
		_, damaged := n.damaged[name]
		n.mu.Unlock()
		if damaged {
			return nil, fmt.Errorf("%w, served read-only up to the damage: %w", ErrStreamDamaged, err)
		}
		return nil, err
	}
	if !slices.Contains(names, name) {
		names = append(names, name)
		sort.Strings(names)
	}
	if err := n.members.AdvertiseSpool(n.spoolEP, names); err != nil {
		l.Close()
		return nil, fmt.Errorf("fastmq: advertise stream %q: %w", name, err)
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		l.Close()
		return nil, ErrClosed
	}
	n.streams[name] = l
	delete(n.failed, name)
	ro := n.damaged[name]
	delete(n.damaged, name)
	n.mu.Unlock()
	if ro != nil {
		ro.Close() // repaired: the writer's log serves it now
	}
	n.log.Info("stream open", "stream", name, "offset", l.NextOffset())
	return l, nil
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

// openDisk opens every stream found on disk, before the spool server
// binds its port: a consumer's first fetch after a restart finds them. A
// stream that does not open (a damaged spool, say) does not stop the
// node: the healthy ones are served, the failed one is logged and shown in
// Status and the metrics, and every later Stream call tries it again
// (after a repair, say).
func (n *Node) openDisk() error {
	entries, err := os.ReadDir(filepath.Join(n.cfg.DataDir, "streams"))
	if err != nil {
		return fmt.Errorf("fastmq: list streams: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || !streamNameRE.MatchString(e.Name()) {
			continue
		}
		name := e.Name()
		l, err := n.openLog(name)
		if err != nil {
			n.failed[name] = err
			n.openDamaged(name, err)
			continue
		}
		n.streams[name] = l
		n.log.Info("stream open", "stream", name, "offset", l.NextOffset())
	}
	return nil
}

// openDamaged serves a stream that would not open, err saying why,
// read-only up to its damage when err is damage in the middle of its
// spool; either way it logs the stream at Error.
func (n *Node) openDamaged(name string, err error) {
	if !errors.Is(err, spool.ErrCorrupt) {
		n.log.Error("stream not served", "stream", name, "err", err)
		return
	}
	l, roErr := spool.OpenReadOnly(spool.Config{Dir: filepath.Join(n.cfg.DataDir, "streams", name), Logger: n.cfg.Logger})
	if roErr != nil {
		n.log.Error("stream not served", "stream", name, "err", err, "read_only_err", roErr)
		return
	}
	n.damaged[name] = l
	n.log.Error("stream damaged: appends refused, served read-only up to the damage until repaired", "stream", name, "err", err)
}

// closeStreams closes the streams openDisk opened, for a New that fails
// before the node is whole.
func (n *Node) closeStreams() {
	for _, l := range n.streams {
		l.Close()
	}
	for _, l := range n.damaged {
		l.Close()
	}
}

func (n *Node) streamNamesLocked() []string {
	names := make([]string, 0, len(n.streams))
	for s := range n.streams {
		names = append(names, s)
	}
	sort.Strings(names)
	return names
}

// servedNamesLocked returns the names of the streams the node serves,
// damaged ones included, sorted: those it advertises.
func (n *Node) servedNamesLocked() []string {
	names := n.streamNamesLocked()
	for s := range n.damaged {
		names = append(names, s)
	}
	sort.Strings(names)
	return names
}

// Streams returns the names of the node's open streams, sorted (not the
// damaged ones, served read-only: see Status).
func (n *Node) Streams() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.streamNamesLocked()
}

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
