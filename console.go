package fastmq

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/internal/diskguard"
	"github.com/fastmq/fastmq/spool"
)

// What a web console needs from a Node: the node's HTTP address in gossip,
// richer per-stream and per-member status, the disk under the data
// directory, and its local streams (LookupStream) for a read-only peek.

// HTTPService is the service name under which a node advertises the address
// of its HTTP server (console, /status, /metrics), with kind HTTPKind.
const HTTPService = "fastmq-http"

// HTTPKind is the Service.Kind of the HTTPService advertisement.
const HTTPKind = "HTTP"

// ObserverTag is the gossip tag of short-lived observer nodes (those of the
// CLI's members command): status gathering and member lists skip them.
const ObserverTag = "fastmq-observer"

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

// LookupStream returns the local spool of a stream the node holds (open
// and served), without creating it as Stream does; false when it holds
// none. The node owns the log: do not Close it.
func (n *Node) LookupStream(name string) (*spool.Log, bool) { return n.streams.Lookup(name) }
