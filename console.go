package fastmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/internal/diskguard"
	"github.com/fastmq/fastmq/spool"
)

// What a web console (package console) needs from a Node: the node's HTTP
// address in gossip, richer per-stream and per-member status, the disk
// under the data directory, and a read-only peek at a local stream.

// HTTPService is the service name under which a node advertises the address
// of its HTTP server (console, /status, /metrics), with kind HTTPKind.
const HTTPService = "fastmq-http"

// HTTPKind is the Service.Kind of the HTTPService advertisement.
const HTTPKind = "HTTP"

// ObserverTag is the gossip tag of short-lived observer nodes (those of the
// CLI's members command): status gathering and member lists skip them.
const ObserverTag = "fastmq-observer"

// ErrNoStream reports a stream the node does not hold.
var ErrNoStream = errors.New("fastmq: no such stream")

// ServiceStatus is one service a member advertises.
type ServiceStatus struct {
	Name      string   `json:"name"`
	Kind      string   `json:"kind"`
	Endpoints []string `json:"endpoints"`
}

// DiskStatus describes the file system under a node's data directory.
type DiskStatus struct {
	Path       string `json:"path"`
	TotalBytes uint64 `json:"total_bytes"`
	FreeBytes  uint64 `json:"free_bytes"`  // available to the node's user
	SpoolBytes int64  `json:"spool_bytes"` // bytes in the node's stream segments
	Error      string `json:"error,omitempty"`
}

// AdvertiseHTTP advertises addr, the host:port the node's HTTP server
// listens on, in gossip as HTTPService, so that a console on any node can
// fetch this node's status. A wildcard host (0.0.0.0, ::) stands for the
// node's gossip host. It blocks as discovery.Membership.Advertise does.
func (n *Node) AdvertiseHTTP(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("fastmq: http address %q: %w", addr, err)
	}
	return n.members.Advertise(discovery.Service{Name: HTTPService, Kind: HTTPKind, Endpoints: []string{"tcp://" + addr}})
}

// HTTPAddrOf returns the host:port of the HTTP server advertised among a
// member's services (see AdvertiseHTTP), or "".
func HTTPAddrOf(svcs []discovery.Service) string {
	for _, s := range svcs {
		if s.Name == HTTPService && s.Kind == HTTPKind && len(s.Endpoints) > 0 {
			return strings.TrimPrefix(s.Endpoints[0], "tcp://")
		}
	}
	return ""
}

// memberStatus converts a gossip member for Status.
func memberStatus(m discovery.Member) MemberStatus {
	ms := MemberStatus{Name: m.Name, Addr: m.Addr, Status: m.Status.String(), RTT: m.RTT, HTTP: HTTPAddrOf(m.Services)}
	if len(m.Tags) > 0 {
		ms.Tags = m.Tags
	}
	for _, s := range m.Services {
		if s.Name == HTTPService {
			continue
		}
		ms.Services = append(ms.Services, ServiceStatus{Name: s.Name, Kind: s.Kind, Endpoints: s.Endpoints})
	}
	if m.Spool != nil {
		ms.SpoolEndpoint = m.Spool.Endpoint
		ms.Streams = m.Spool.Streams
		ms.StreamsPartial = m.Spool.Partial
	}
	return ms
}

// streamStatus describes one open local stream.
func (n *Node) streamStatus(name string, l *spool.Log) StreamStatus {
	s := l.Stats()
	ss := StreamStatus{Name: name, Oldest: s.Oldest, Next: s.Next, Bytes: s.Bytes, Segments: s.Segments,
		RetentionAge: n.cfg.Spool.RetentionAge, RetentionBytes: n.cfg.Spool.RetentionBytes}
	if !s.OldestTime.IsZero() {
		ss.OldestTime, ss.NewestTime = s.OldestTime.UTC(), s.NewestTime.UTC()
	}
	return ss
}

// hostStatus fills the node-wide parts of st that are not gossip or
// streams: the time, the HTTP address and the disk.
func (n *Node) hostStatus(st *Status) {
	st.Time = time.Now().UTC()
	for _, m := range st.Members {
		if m.Name == n.cfg.Name {
			st.HTTP = m.HTTP
		}
	}
	st.Disk = DiskStatus{Path: n.cfg.DataDir}
	total, free, err := diskguard.Space(n.cfg.DataDir)
	if err != nil {
		st.Disk.Error = err.Error()
	}
	st.Disk.TotalBytes, st.Disk.FreeBytes = total, free
	for _, s := range st.Streams {
		st.Disk.SpoolBytes += s.Bytes
	}
}

// Peek reads up to limit records of a local stream from offset from (the
// oldest retained one if from is older), without consuming anything: no
// offset is committed anywhere. It returns the records and the offset after
// the last one (where the next page starts). It does not wait for records
// at the tail, and returns ErrNoStream, without creating the stream, when
// the node does not hold it.
func (n *Node) Peek(ctx context.Context, stream string, from uint64, limit int) ([]spool.Record, uint64, error) {
	l, ok := n.lookupStream(stream)
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

// OffsetAt returns the first offset of a local stream whose record time is
// at or after t (the stream's next offset when there is none), for a peek
// by time. It returns ErrNoStream when the node does not hold the stream.
func (n *Node) OffsetAt(stream string, t time.Time) (uint64, error) {
	l, ok := n.lookupStream(stream)
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrNoStream, stream)
	}
	return l.SeekTime(t)
}
