// Package metrics exports a node's counters to Prometheus. Nothing is
// counted here: when scraped, the collector takes a Snapshot from its
// source (the node's Status) and turns it into constant metrics, so hot
// paths pay nothing for metrics.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fastmq/fastmq/patterns/pull"
)

// Snapshot is what the collector exports, read once per scrape.
type Snapshot struct {
	Streams   []Stream
	Server    pull.ServerStats
	Consumers []Consumer
	Members   map[string]int // gossip members by status
}

// Stream is one local stream's offsets, or a stream that failed to open.
type Stream struct {
	Name         string
	Oldest, Next uint64
	Failed       bool // on disk but not served: its spool would not open
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
	descAppended    = prometheus.NewDesc("fastmq_stream_next_offset", "Next offset of a local stream: the records appended to it over its life.", []string{"stream"}, nil)
	descOldest      = prometheus.NewDesc("fastmq_stream_oldest_offset", "Oldest retained offset of a local stream.", []string{"stream"}, nil)
	descServedRecs  = prometheus.NewDesc("fastmq_server_records_served_total", "Records served to consumers.", nil, nil)
	descServedBytes = prometheus.NewDesc("fastmq_server_bytes_served_total", "Raw batch bytes served to consumers.", nil, nil)
	descRequests    = prometheus.NewDesc("fastmq_server_requests_total", "Fetch requests received.", nil, nil)
	descParked      = prometheus.NewDesc("fastmq_server_parked_fetches", "Fetches waiting at the tail.", nil, nil)
	descDelivered   = prometheus.NewDesc("fastmq_consumer_delivered_total", "Records delivered to the application.", []string{"consumer", "stream", "publisher"}, nil)
	descAcked       = prometheus.NewDesc("fastmq_consumer_acked_offset", "Next offset after the acknowledged prefix.", []string{"consumer", "stream", "publisher"}, nil)
	descCommitted   = prometheus.NewDesc("fastmq_consumer_committed_offset", "Committed offset.", []string{"consumer", "stream", "publisher"}, nil)
	descLagRecs     = prometheus.NewDesc("fastmq_consumer_lag_records", "Records the consumer is behind the publisher.", []string{"consumer", "stream", "publisher"}, nil)
	descLagSecs     = prometheus.NewDesc("fastmq_consumer_lag_seconds", "Age of the newest delivered record while lagging.", []string{"consumer", "stream", "publisher"}, nil)
	descResets      = prometheus.NewDesc("fastmq_consumer_out_of_range_resets_total", "Positions that fell below retention.", []string{"consumer", "stream", "publisher"}, nil)
	descUnacked     = prometheus.NewDesc("fastmq_consumer_oldest_unacked_seconds", "How long the oldest record delivered and not acknowledged has been out (0 when none): it holds the committed offset back.", []string{"consumer", "stream", "publisher"}, nil)
	descStuck       = prometheus.NewDesc("fastmq_consumer_stuck_records_total", "Records left unacknowledged longer than the consumer's warning threshold.", []string{"consumer", "stream", "publisher"}, nil)
	descFailed      = prometheus.NewDesc("fastmq_stream_failed", "1 for a local stream on disk that would not open (a damaged spool) and is not served, 0 for a served one.", []string{"stream"}, nil)
	descMembers     = prometheus.NewDesc("fastmq_members", "Gossip members by status.", []string{"status"}, nil)
)

type collector struct{ snapshot func() Snapshot }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAppended, descOldest, descServedRecs, descServedBytes, descRequests, descParked,
		descDelivered, descAcked, descCommitted, descLagRecs, descLagSecs, descResets, descUnacked, descStuck, descFailed, descMembers} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.snapshot()
	for _, s := range st.Streams {
		if s.Failed {
			ch <- prometheus.MustNewConstMetric(descFailed, prometheus.GaugeValue, 1, s.Name)
			continue
		}
		ch <- prometheus.MustNewConstMetric(descFailed, prometheus.GaugeValue, 0, s.Name)
		ch <- prometheus.MustNewConstMetric(descAppended, prometheus.GaugeValue, float64(s.Next), s.Name)
		ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, float64(s.Oldest), s.Name)
	}
	ch <- prometheus.MustNewConstMetric(descServedRecs, prometheus.CounterValue, float64(st.Server.RecordsServed))
	ch <- prometheus.MustNewConstMetric(descServedBytes, prometheus.CounterValue, float64(st.Server.BytesServed))
	ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(st.Server.Requests))
	ch <- prometheus.MustNewConstMetric(descParked, prometheus.GaugeValue, float64(st.Server.Parked))
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
		}
	}
	for s, k := range st.Members {
		ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(k), s)
	}
}
