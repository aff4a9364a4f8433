package metrics

import (
	"net/http"
	"time"

	"github.com/fastmq/fastmq"
)

// NodeHandler serves the Prometheus metrics of n: each scrape takes n's
// Status once (see Handler). Values are read from the node's counters
// when scraped; nothing is counted twice on hot paths.
func NodeHandler(n *fastmq.Node) http.Handler {
	return Handler(func() Snapshot { return FromStatus(n.Status()) })
}

// FromStatus is st as the collector takes it.
func FromStatus(st fastmq.Status) Snapshot {
	snap := Snapshot{Server: st.Server, Members: map[string]int{},
		RPCClients: st.RPC.Clients, RPCServers: st.RPC.Servers,
		Disk: Disk{Known: st.Disk.Error == "", Total: st.Disk.TotalBytes, Free: st.Disk.FreeBytes,
			Refusing: st.DiskGuard.Refusing != "", Warning: st.DiskGuard.Warning,
			DroppedSegments: st.DiskGuard.DroppedSegments, DroppedBytes: st.DiskGuard.DroppedBytes, Refused: st.DiskGuard.Refused}}
	for _, s := range st.Streams {
		snap.Streams = append(snap.Streams, Stream{Name: s.Name, Oldest: s.Oldest, Next: s.Next, Failed: s.Error != "", Damaged: s.Damaged,
			Bytes: s.Bytes, Fsyncs: s.Fsyncs, RetentionForced: s.RetentionForced})
	}
	for _, g := range st.GroupsBehind {
		snap.GroupsBehind = append(snap.GroupsBehind, GroupBehind{Stream: g.Stream, Group: g.Group, Records: g.Records, Bytes: g.Bytes, Capped: g.Capped})
	}
	for _, c := range st.Consumers {
		snap.Consumers = append(snap.Consumers, Consumer{Name: c.Name, Stream: c.Stream, Publishers: c.Publishers})
	}
	for _, m := range st.Members {
		if m.Tags[fastmq.ObserverTag] != "" {
			continue // a command's short-lived node (fastmq status, group ls)
		}
		snap.Members[m.Status]++
	}
	snap.Groups = st.Groups
	snap.Readers = st.Readers
	return snap
}

// DownFrom is the DownPublisher of a publisher whose last known Status
// was st, down since since.
func DownFrom(st fastmq.Status, since time.Time) DownPublisher {
	snap := FromStatus(st)
	return DownPublisher{Name: st.Name, Since: since, Streams: snap.Streams, Groups: st.Groups}
}
