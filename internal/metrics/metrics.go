// Package metrics exports a node's counters to Prometheus. Nothing is
// counted here: when scraped, the collector takes a Snapshot from its
// source (the node's Status) and turns it into constant metrics, so hot
// paths pay nothing for metrics. Whoever serves a node's /metrics (the
// console, cmd/fastmq) mounts NodeHandler: the library's root does not
// link Prometheus.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/patterns/rpc"
	"github.com/fastmq/fastmq/spool"
)

// Snapshot is what the collector exports, read once per scrape.
type Snapshot struct {
	Streams   []Stream
	Server    pull.ServerStats
	Consumers []Consumer
	Members   map[string]int // gossip members by status
	// The node's RPC clients and servers, by service.
	RPCClients map[string]rpc.ClientStats
	RPCServers map[string]rpc.ServerStats
	Disk       Disk
	// Groups are the consumer groups of the node's streams.
	Groups []group.GroupStats
	// Consumer groups far behind on the node's streams.
	GroupsBehind []GroupBehind
	// Readers are who fetched from the node's spool server lately.
	Readers []pull.ClientStats
	// Down are the mesh's down publishers as the console last saw them
	// (empty where no console serves the metrics).
	Down []DownPublisher
}

// GroupBehind is a consumer group far behind on a local stream.
type GroupBehind struct {
	Stream, Group string
	Records       uint64
	Bytes         int64
	Capped        bool // retention's cap removed records it had not acknowledged
}

// Disk is the file system under the node's data directory and the state
// of its disk guard.
type Disk struct {
	Known           bool // Total and Free were read
	Total, Free     uint64
	Refusing        bool // the disk guard refuses appends
	Warning         bool // over the disk guard's high-water mark
	DroppedSegments uint64
	DroppedBytes    uint64
	Refused         uint64 // appends refused
}

// Stream is one local stream's offsets, or a stream that failed to open.
type Stream struct {
	Name         string
	Oldest, Next uint64
	Failed       bool  // on disk but takes no appends: its spool would not open
	Damaged      bool  // Failed, and served read-only up to its damage
	Bytes        int64 // bytes in its segment files
	Fsyncs       spool.FsyncStats
	// RetentionForced: records retention's cap removed before every
	// consumer group acknowledged them.
	RetentionForced uint64
}

// Consumer is one consumer's per-publisher counters.
type Consumer struct {
	Name, Stream string
	Publishers   []pull.PublisherStats
}

// Handler serves the metrics of the snapshots that snapshot returns, one
// per scrape, in Prometheus' text format. snapshot is called from the
// HTTP server's goroutines and must be safe for concurrent use.
//
// Beside the node's metrics it serves the Go runtime's (go_*), the
// process's (process_*: CPU, memory, open files) and go_build_info, which
// carries the module's version.
func Handler(snapshot func() Snapshot) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(snapshot),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector())
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// NewCollector returns a Prometheus collector of the snapshots that
// snapshot returns, for callers with a registry of their own.
func NewCollector(snapshot func() Snapshot) prometheus.Collector {
	return collector{snapshot: snapshot}
}

var (
	descAppended     = prometheus.NewDesc("fastmq_stream_next_offset", "Next offset of a local stream: the records appended to it over its life.", []string{"stream"}, nil)
	descOldest       = prometheus.NewDesc("fastmq_stream_oldest_offset", "Oldest retained offset of a local stream.", []string{"stream"}, nil)
	descServedRecs   = prometheus.NewDesc("fastmq_server_records_served_total", "Records served to consumers.", nil, nil)
	descServedBytes  = prometheus.NewDesc("fastmq_server_bytes_served_total", "Raw batch bytes served to consumers.", nil, nil)
	descRequests     = prometheus.NewDesc("fastmq_server_requests_total", "Fetch requests received.", nil, nil)
	descParked       = prometheus.NewDesc("fastmq_server_parked_fetches", "Fetches waiting at the tail.", nil, nil)
	descForbidden    = prometheus.NewDesc("fastmq_server_forbidden_total", "Requests the spool server's ACL refused (status forbidden), group requests included.", nil, nil)
	descDelivered    = prometheus.NewDesc("fastmq_consumer_delivered_total", "Records handed to the application (returned by Next).", []string{"consumer", "stream", "publisher"}, nil)
	descFetched      = prometheus.NewDesc("fastmq_consumer_fetched_total", "Records fetched and queued for the application.", []string{"consumer", "stream", "publisher"}, nil)
	descAcked        = prometheus.NewDesc("fastmq_consumer_acked_offset", "Next offset after the acknowledged prefix.", []string{"consumer", "stream", "publisher"}, nil)
	descCommitted    = prometheus.NewDesc("fastmq_consumer_committed_offset", "Committed offset.", []string{"consumer", "stream", "publisher"}, nil)
	descLagRecs      = prometheus.NewDesc("fastmq_consumer_lag_records", "Records the consumer is behind the publisher.", []string{"consumer", "stream", "publisher"}, nil)
	descLagSecs      = prometheus.NewDesc("fastmq_consumer_lag_seconds", "Age of the newest delivered record while lagging.", []string{"consumer", "stream", "publisher"}, nil)
	descResets       = prometheus.NewDesc("fastmq_consumer_out_of_range_resets_total", "Positions that fell below retention.", []string{"consumer", "stream", "publisher"}, nil)
	descUnacked      = prometheus.NewDesc("fastmq_consumer_oldest_unacked_seconds", "How long the oldest record delivered and not acknowledged has been out (0 when none): it holds the committed offset back.", []string{"consumer", "stream", "publisher"}, nil)
	descStuck        = prometheus.NewDesc("fastmq_consumer_stuck_records_total", "Records left unacknowledged longer than the consumer's warning threshold.", []string{"consumer", "stream", "publisher"}, nil)
	descGaps         = prometheus.NewDesc("fastmq_consumer_gaps_skipped_total", "Gaps in the publisher's log crossed (offsets spool repair removed).", []string{"consumer", "stream", "publisher"}, nil)
	descSkipped      = prometheus.NewDesc("fastmq_consumer_records_skipped_total", "Offsets passed over without a record: in gaps and below retention.", []string{"consumer", "stream", "publisher"}, nil)
	descOtherLogs    = prometheus.NewDesc("fastmq_consumer_other_logs_total", "Times the publisher served another log than the position was read from.", []string{"consumer", "stream", "publisher"}, nil)
	descDiverged     = prometheus.NewDesc("fastmq_consumer_diverged_total", "Times the publisher's log had lost records the consumer had read.", []string{"consumer", "stream", "publisher"}, nil)
	descReplaced     = prometheus.NewDesc("fastmq_consumer_records_replaced_total", "Offsets read again because new records replaced those read.", []string{"consumer", "stream", "publisher"}, nil)
	descStopped      = prometheus.NewDesc("fastmq_consumer_publisher_stopped", "1 when pulling from the publisher stopped for good (damage, out of range under StopPublisher, protocol errors).", []string{"consumer", "stream", "publisher"}, nil)
	descFetchErrors  = prometheus.NewDesc("fastmq_consumer_fetch_errors_total", "Failed or timed-out fetches.", []string{"consumer", "stream", "publisher"}, nil)
	descReconnects   = prometheus.NewDesc("fastmq_consumer_reconnects_total", "Connections to the publisher re-established after one was lost.", []string{"consumer", "stream", "publisher"}, nil)
	descGroupBehind  = prometheus.NewDesc("fastmq_group_far_behind_records", "Records a consumer group far behind (past the node's threshold, or capped by retention) has not acknowledged on a local stream; absent for groups not far behind.", []string{"stream", "group"}, nil)
	descGroupCapped  = prometheus.NewDesc("fastmq_group_retention_capped", "1 when retention's cap removed records of a local stream that the consumer group had not acknowledged.", []string{"stream", "group"}, nil)
	descForced       = prometheus.NewDesc("fastmq_stream_retention_forced_records_total", "Records of a local stream that retention's cap removed before every consumer group acknowledged them.", []string{"stream"}, nil)
	descStreamBytes  = prometheus.NewDesc("fastmq_stream_bytes", "Bytes in a local stream's segment files.", []string{"stream"}, nil)
	descFsync        = prometheus.NewDesc("fastmq_spool_fsync_duration_seconds", "Latency of a local stream's group fsyncs.", []string{"stream"}, nil)
	descRPCCalls     = prometheus.NewDesc("fastmq_rpc_client_calls_total", "RPC calls made, by service.", []string{"service"}, nil)
	descRPCErrors    = prometheus.NewDesc("fastmq_rpc_client_errors_total", "RPC calls that returned an error (remote errors included).", []string{"service"}, nil)
	descRPCRetries   = prometheus.NewDesc("fastmq_rpc_client_retries_total", "RPC attempts after the first.", []string{"service"}, nil)
	descRPCTimeouts  = prometheus.NewDesc("fastmq_rpc_client_timeouts_total", "RPC calls that ended with their context.", []string{"service"}, nil)
	descRPCEjected   = prometheus.NewDesc("fastmq_rpc_client_ejections_total", "RPC instances ejected for consecutive failures.", []string{"service"}, nil)
	descRPCLatency   = prometheus.NewDesc("fastmq_rpc_client_latency_seconds", "RPC call latency, by service.", []string{"service"}, nil)
	descRPCInstCalls = prometheus.NewDesc("fastmq_rpc_client_instance_attempts_total", "RPC attempts sent to an instance.", []string{"service", "instance"}, nil)
	descRPCInstFails = prometheus.NewDesc("fastmq_rpc_client_instance_failures_total", "RPC attempts that failed on an instance: timeout, connection lost, refused.", []string{"service", "instance"}, nil)
	descRPCInstTOs   = prometheus.NewDesc("fastmq_rpc_client_instance_timeouts_total", "RPC attempts that timed out on an instance.", []string{"service", "instance"}, nil)
	descRPCInstEject = prometheus.NewDesc("fastmq_rpc_client_instance_ejections_total", "Times an instance was ejected.", []string{"service", "instance"}, nil)
	descRPCInstOut   = prometheus.NewDesc("fastmq_rpc_client_instance_outstanding", "RPC attempts sent to an instance and not finished.", []string{"service", "instance"}, nil)
	descRPCInstLat   = prometheus.NewDesc("fastmq_rpc_client_instance_latency_seconds", "RPC reply latency of an instance.", []string{"service", "instance"}, nil)
	descRPCHandled   = prometheus.NewDesc("fastmq_rpc_server_handled_total", "RPC handler runs, by service.", []string{"service"}, nil)
	descRPCSrvErrs   = prometheus.NewDesc("fastmq_rpc_server_errors_total", "RPC handler runs that returned an error.", []string{"service"}, nil)
	descRPCRequests  = prometheus.NewDesc("fastmq_rpc_server_requests_total", "RPC requests received.", []string{"service"}, nil)
	descRPCRefused   = prometheus.NewDesc("fastmq_rpc_server_refused_total", "RPC requests refused: overloaded, expired or shutting down.", []string{"service", "reason"}, nil)
	descRPCInFlight  = prometheus.NewDesc("fastmq_rpc_server_in_flight", "RPC requests accepted and not yet answered.", []string{"service"}, nil)
	descDiskFree     = prometheus.NewDesc("fastmq_disk_free_bytes", "Bytes available on the file system under the node's data directory.", nil, nil)
	descDiskTotal    = prometheus.NewDesc("fastmq_disk_total_bytes", "Size of the file system under the node's data directory.", nil, nil)
	descGuardRefuse  = prometheus.NewDesc("fastmq_disk_guard_refusing", "1 while the disk guard refuses appends (a disk limit is reached).", nil, nil)
	descGuardWarn    = prometheus.NewDesc("fastmq_disk_guard_warning", "1 while the spools or the disk are over the disk guard's high-water mark.", nil, nil)
	descGuardDrops   = prometheus.NewDesc("fastmq_disk_guard_dropped_segments_total", "Segments deleted by the disk guard to free space.", nil, nil)
	descGuardDropB   = prometheus.NewDesc("fastmq_disk_guard_dropped_bytes_total", "Bytes of the segments deleted by the disk guard.", nil, nil)
	descGuardRefuses = prometheus.NewDesc("fastmq_disk_guard_refused_appends_total", "Appends refused by the disk guard.", nil, nil)
	descFailed       = prometheus.NewDesc("fastmq_stream_failed", "1 for a local stream on disk that would not open (a damaged spool) and takes no appends, 0 for a served one.", []string{"stream"}, nil)
	descDamaged      = prometheus.NewDesc("fastmq_stream_damaged", "1 for a local stream whose spool is damaged in the middle, served read-only up to the damage until repaired, 0 for another.", []string{"stream"}, nil)
	descMembers      = prometheus.NewDesc("fastmq_members", "Gossip members by status (commands' short-lived observers left out).", []string{"status"}, nil)
)

type collector struct{ snapshot func() Snapshot }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAppended, descOldest, descServedRecs, descServedBytes, descRequests, descParked, descForbidden,
		descDelivered, descAcked, descCommitted, descLagRecs, descLagSecs, descResets, descUnacked, descStuck, descFailed, descDamaged, descMembers,
		descFetched, descGaps, descSkipped, descOtherLogs, descDiverged, descReplaced, descStopped, descFetchErrors, descReconnects,
		descStreamBytes, descFsync, descRPCCalls, descRPCErrors, descRPCRetries, descRPCTimeouts, descRPCEjected, descRPCLatency,
		descRPCInstCalls, descRPCInstFails, descRPCInstTOs, descRPCInstEject, descRPCInstOut, descRPCInstLat,
		descRPCHandled, descRPCSrvErrs, descRPCRequests, descRPCRefused, descRPCInFlight,
		descDiskFree, descDiskTotal, descGuardRefuse, descGuardWarn, descGuardDrops, descGuardDropB, descGuardRefuses,
		descGroupBehind, descGroupCapped, descForced} {
		ch <- d
	}
	for _, d := range groupDescs {
		ch <- d
	}
	for _, d := range downDescs {
		ch <- d
	}
	for _, d := range readerDescs {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.snapshot()
	for _, s := range st.Streams {
		damaged := 0.0
		if s.Damaged {
			damaged = 1
		}
		ch <- prometheus.MustNewConstMetric(descDamaged, prometheus.GaugeValue, damaged, s.Name)
		if s.Failed {
			ch <- prometheus.MustNewConstMetric(descFailed, prometheus.GaugeValue, 1, s.Name)
			continue
		}
		ch <- prometheus.MustNewConstMetric(descFailed, prometheus.GaugeValue, 0, s.Name)
		ch <- prometheus.MustNewConstMetric(descAppended, prometheus.GaugeValue, float64(s.Next), s.Name)
		ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, float64(s.Oldest), s.Name)
		ch <- prometheus.MustNewConstMetric(descStreamBytes, prometheus.GaugeValue, float64(s.Bytes), s.Name)
		ch <- prometheus.MustNewConstMetric(descForced, prometheus.CounterValue, float64(s.RetentionForced), s.Name)
		ch <- prometheus.MustNewConstHistogram(descFsync, s.Fsyncs.Count, s.Fsyncs.Sum.Seconds(), fsyncBuckets(s.Fsyncs), s.Name)
	}
	for _, g := range st.GroupsBehind {
		capped := 0.0
		if g.Capped {
			capped = 1
		}
		ch <- prometheus.MustNewConstMetric(descGroupBehind, prometheus.GaugeValue, float64(g.Records), g.Stream, g.Group)
		ch <- prometheus.MustNewConstMetric(descGroupCapped, prometheus.GaugeValue, capped, g.Stream, g.Group)
	}
	ch <- prometheus.MustNewConstMetric(descServedRecs, prometheus.CounterValue, float64(st.Server.RecordsServed))
	ch <- prometheus.MustNewConstMetric(descServedBytes, prometheus.CounterValue, float64(st.Server.BytesServed))
	ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(st.Server.Requests))
	ch <- prometheus.MustNewConstMetric(descParked, prometheus.GaugeValue, float64(st.Server.Parked))
	ch <- prometheus.MustNewConstMetric(descForbidden, prometheus.CounterValue, float64(st.Server.Forbidden))
	for _, cs := range st.Consumers {
		for _, p := range cs.Publishers {
			l := []string{cs.Name, cs.Stream, p.Publisher}
			ch <- prometheus.MustNewConstMetric(descDelivered, prometheus.CounterValue, float64(p.Delivered), l...)
			ch <- prometheus.MustNewConstMetric(descAcked, prometheus.GaugeValue, float64(p.Acked), l...)
			if p.Committed != ^uint64(0) { // nothing committed yet: no value, not 2^64-1
				ch <- prometheus.MustNewConstMetric(descCommitted, prometheus.GaugeValue, float64(p.Committed), l...)
			}
			ch <- prometheus.MustNewConstMetric(descLagRecs, prometheus.GaugeValue, float64(p.LagRecords), l...)
			ch <- prometheus.MustNewConstMetric(descLagSecs, prometheus.GaugeValue, p.LagTime.Seconds(), l...)
			ch <- prometheus.MustNewConstMetric(descResets, prometheus.CounterValue, float64(p.Resets), l...)
			ch <- prometheus.MustNewConstMetric(descUnacked, prometheus.GaugeValue, p.OldestUnacked.Seconds(), l...)
			ch <- prometheus.MustNewConstMetric(descStuck, prometheus.CounterValue, float64(p.StuckRecords), l...)
			ch <- prometheus.MustNewConstMetric(descFetched, prometheus.CounterValue, float64(p.Fetched), l...)
			ch <- prometheus.MustNewConstMetric(descGaps, prometheus.CounterValue, float64(p.GapsSkipped), l...)
			ch <- prometheus.MustNewConstMetric(descSkipped, prometheus.CounterValue, float64(p.RecordsSkipped), l...)
			ch <- prometheus.MustNewConstMetric(descOtherLogs, prometheus.CounterValue, float64(p.OtherLogs), l...)
			ch <- prometheus.MustNewConstMetric(descDiverged, prometheus.CounterValue, float64(p.Diverged), l...)
			ch <- prometheus.MustNewConstMetric(descReplaced, prometheus.CounterValue, float64(p.RecordsReplaced), l...)
			ch <- prometheus.MustNewConstMetric(descFetchErrors, prometheus.CounterValue, float64(p.Errors), l...)
			ch <- prometheus.MustNewConstMetric(descReconnects, prometheus.CounterValue, float64(p.Reconnects), l...)
			stopped := 0.0
			if p.Stopped != nil || p.StoppedReason != "" {
				stopped = 1
			}
			ch <- prometheus.MustNewConstMetric(descStopped, prometheus.GaugeValue, stopped, l...)
		}
	}
	for s, k := range st.Members {
		ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(k), s)
	}
	collectRPC(ch, st)
	collectDisk(ch, st.Disk)
	collectGroups(ch, st.Groups)
	collectDown(ch, st.Down)
	collectReaders(ch, st.Readers)
}

// collectDisk exports the disk and the disk guard's state.
func collectDisk(ch chan<- prometheus.Metric, d Disk) {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	if d.Known {
		ch <- prometheus.MustNewConstMetric(descDiskFree, prometheus.GaugeValue, float64(d.Free))
		ch <- prometheus.MustNewConstMetric(descDiskTotal, prometheus.GaugeValue, float64(d.Total))
	}
	ch <- prometheus.MustNewConstMetric(descGuardRefuse, prometheus.GaugeValue, b(d.Refusing))
	ch <- prometheus.MustNewConstMetric(descGuardWarn, prometheus.GaugeValue, b(d.Warning))
	ch <- prometheus.MustNewConstMetric(descGuardDrops, prometheus.CounterValue, float64(d.DroppedSegments))
	ch <- prometheus.MustNewConstMetric(descGuardDropB, prometheus.CounterValue, float64(d.DroppedBytes))
	ch <- prometheus.MustNewConstMetric(descGuardRefuses, prometheus.CounterValue, float64(d.Refused))
}

// fsyncBuckets returns the cumulative counts of an fsync histogram by
// upper bound in seconds.
func fsyncBuckets(f spool.FsyncStats) map[float64]uint64 {
	b := make(map[float64]uint64, len(spool.FsyncBuckets))
	var n uint64
	for i, le := range spool.FsyncBuckets {
		n += f.Counts[i]
		b[le.Seconds()] = n
	}
	return b
}

// histogram exports an RPC latency histogram (cumulative buckets).
func histogram(ch chan<- prometheus.Metric, d *prometheus.Desc, h rpc.Histogram, l ...string) {
	b := make(map[float64]uint64, len(rpc.LatencyBuckets))
	var n uint64
	for i, le := range rpc.LatencyBuckets {
		n += h.Counts[i]
		b[le.Seconds()] = n
	}
	ch <- prometheus.MustNewConstHistogram(d, h.Count(), h.Sum.Seconds(), b, l...)
}

// collectRPC exports the node's RPC client and server counters.
func collectRPC(ch chan<- prometheus.Metric, st Snapshot) {
	counter := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	for svc, c := range st.RPCClients {
		counter(descRPCCalls, c.Calls, svc)
		counter(descRPCErrors, c.Errors, svc)
		counter(descRPCRetries, c.Retries, svc)
		counter(descRPCTimeouts, c.Timeouts, svc)
		counter(descRPCEjected, c.Ejections, svc)
		histogram(ch, descRPCLatency, c.Latency, svc)
		for _, in := range c.Instances {
			counter(descRPCInstCalls, in.Calls, svc, in.Node)
			counter(descRPCInstFails, in.Failures, svc, in.Node)
			counter(descRPCInstTOs, in.Timeouts, svc, in.Node)
			counter(descRPCInstEject, in.Ejections, svc, in.Node)
			ch <- prometheus.MustNewConstMetric(descRPCInstOut, prometheus.GaugeValue, float64(in.Outstanding), svc, in.Node)
			histogram(ch, descRPCInstLat, in.Latency, svc, in.Node)
		}
	}
	for svc, s := range st.RPCServers {
		counter(descRPCRequests, s.Requests, svc)
		counter(descRPCHandled, s.Handled, svc)
		counter(descRPCSrvErrs, s.Errors, svc)
		counter(descRPCRefused, s.Overloaded, svc, "overloaded")
		counter(descRPCRefused, s.Expired, svc, "expired")
		counter(descRPCRefused, s.Unavailable, svc, "unavailable")
		ch <- prometheus.MustNewConstMetric(descRPCInFlight, prometheus.GaugeValue, float64(s.InFlight), svc)
	}
}
