package fastmq

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// Status is a snapshot of a node for the JSON /status endpoint.
type Status struct {
	Name      string           `json:"name"`
	Gossip    string           `json:"gossip"`
	Spool     string           `json:"spool_endpoint"`
	Streams   []StreamStatus   `json:"streams"`
	Server    pull.ServerStats `json:"server"`
	Consumers []ConsumerStatus `json:"consumers"`
	Members   []MemberStatus   `json:"members"`
	// Time is when the snapshot was taken; HTTP the node's advertised HTTP
	// address (see AdvertiseHTTP); Disk the file system under DataDir.
	Time time.Time  `json:"time"`
	HTTP string     `json:"http,omitempty"`
	Disk DiskStatus `json:"disk"`
	// RPC is what the node's RPC clients and servers counted (RPCStatus).
	RPC RPCStatus `json:"rpc"`
	// DiskGuard is the state of the node's disk guard (see DiskGuard).
	DiskGuard DiskGuardStatus `json:"disk_guard"`
	// Groups are the consumer groups of the node's streams, this node
	// being their publisher.
	Groups []group.GroupStats `json:"groups"`
	// GroupsBehind lists the consumer groups far behind on the node's
	// streams (see InterestConfig).
	GroupsBehind []GroupBehind `json:"groups_behind,omitempty"`
	// Readers are who fetched from the node's spool server lately, by
	// consumer and node (pull.Server.Clients): plain consumers anywhere
	// in the mesh, whether or not they serve HTTP.
	Readers []pull.ClientStats `json:"readers,omitempty"`
}

// StreamStatus describes one local stream. A stream on disk that would
// not open is listed with Error set and takes no appends; Damaged says the
// node serves it read-only up to its damage (ErrStreamDamaged).
type StreamStatus struct {
	Name    string `json:"name"`
	Oldest  uint64 `json:"oldest"`
	Next    uint64 `json:"next"`
	Error   string `json:"error,omitempty"`
	Damaged bool   `json:"damaged,omitempty"`
	// Size, time range and retention of an open stream.
	Bytes          int64         `json:"bytes"`
	Segments       int           `json:"segments"`
	OldestTime     time.Time     `json:"oldest_time"` // zero when empty
	NewestTime     time.Time     `json:"newest_time"`
	RetentionAge   time.Duration `json:"retention_age_ns"` // 0 = keep
	RetentionBytes int64         `json:"retention_bytes"`  // 0 = no limit
	// Fsyncs is the latency of the stream's group fsyncs since it opened.
	Fsyncs spool.FsyncStats `json:"fsyncs"`
	// RetentionForced: records retention's cap removed before every
	// consumer group acknowledged them (InterestConfig.Retain), since open.
	RetentionForced uint64 `json:"retention_forced,omitempty"`
}

// ConsumerStatus describes one consumer made by the node.
type ConsumerStatus struct {
	Name       string                `json:"name"`
	Stream     string                `json:"stream"`
	Publishers []pull.PublisherStats `json:"publishers"`
}

// MemberStatus describes one gossip member.
type MemberStatus struct {
	Name   string        `json:"name"`
	Addr   string        `json:"addr"`
	Status string        `json:"status"`
	RTT    time.Duration `json:"rtt_ns"`
	// The member's advertisement: user tags, services, spool and HTTP
	// address (see AdvertiseHTTP).
	Tags           map[string]string `json:"tags,omitempty"`
	Services       []ServiceStatus   `json:"services,omitempty"`
	SpoolEndpoint  string            `json:"spool_endpoint,omitempty"`
	Streams        []string          `json:"streams,omitempty"`
	StreamsPartial bool              `json:"streams_partial,omitempty"`
	HTTP           string            `json:"http,omitempty"`
}

// Status returns a snapshot of the node's streams, server, consumers and
// members.
func (n *Node) Status() Status {
	st := Status{Name: n.cfg.Name, Gossip: n.GossipAddr(), Spool: n.spoolEP, Server: n.server.Stats(), Readers: n.server.Clients()}
	open, fails := n.streams.Snapshot()
	names := make([]string, 0, len(open))
	for name := range open {
		names = append(names, name)
	}
	sort.Strings(names)
	logs := make([]*spool.Log, len(names))
	for i, name := range names {
		logs[i] = open[name]
	}
	var failed []StreamStatus
	var damaged []*spool.Log // of failed, nil if not served
	for name, f := range fails {
		failed = append(failed, StreamStatus{Name: name, Error: f.Err.Error()})
		damaged = append(damaged, f.ReadOnly)
	}
	n.mu.Lock()
	type cinfo struct {
		c   *pull.Consumer
		key consumerKey
	}
	var cs []cinfo
	for c, k := range n.consumers {
		cs = append(cs, cinfo{c, k})
	}
	n.mu.Unlock()
	// The logs' and consumers' own locks are taken outside n.mu.
	for i, l := range logs {
		ss := n.streamStatus(names[i], l)
		ss.Fsyncs = l.FsyncStats()
		ss.RetentionForced = l.RetentionForced()
		st.Streams = append(st.Streams, ss)
	}
	for i, l := range damaged {
		if l != nil {
			failed[i].Damaged, failed[i].Oldest, failed[i].Next = true, l.OldestOffset(), l.NextOffset()
		}
	}
	st.Streams = append(st.Streams, failed...)
	sort.Slice(st.Streams, func(i, j int) bool { return st.Streams[i].Name < st.Streams[j].Name })
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].key.name != cs[j].key.name {
			return cs[i].key.name < cs[j].key.name
		}
		return cs[i].key.stream < cs[j].key.stream
	})
	for _, ci := range cs {
		st.Consumers = append(st.Consumers, ConsumerStatus{Name: ci.key.name, Stream: ci.key.stream, Publishers: ci.c.Stats()})
	}
	for _, m := range n.members.Members() {
		st.Members = append(st.Members, memberStatus(m))
	}
	n.hostStatus(&st)
	st.RPC = n.RPCStatus()
	st.DiskGuard = n.guard.Status()
	if srv := n.groupServer(); srv != nil {
		st.Groups = srv.List()
	}
	st.GroupsBehind = n.GroupsBehind()
	return st
}

// StatusHandler serves Status as JSON.
func (n *Node) StatusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(n.Status())
	})
}
