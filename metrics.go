package fastmq

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fastmq/fastmq/patterns/pull"
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
}

// StreamStatus describes one local stream.
type StreamStatus struct {
	Name   string `json:"name"`
	Oldest uint64 `json:"oldest"`
	Next   uint64 `json:"next"`
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
}

// Status returns a snapshot of the node's streams, server, consumers and
// members.
func (n *Node) Status() Status {
	st := Status{Name: n.cfg.Name, Gossip: n.GossipAddr(), Spool: n.spoolEP, Server: n.server.Stats()}
	n.mu.Lock()
	for _, name := range n.streamNamesLocked() {
		l := n.streams[name]
		st.Streams = append(st.Streams, StreamStatus{Name: name, Oldest: l.OldestOffset(), Next: l.NextOffset()})
	}
	type cinfo struct {
		c   *pull.Consumer
		key consumerKey
	}
	var cs []cinfo
	for c, k := range n.consumers {
		cs = append(cs, cinfo{c, k})
	}
	n.mu.Unlock()
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
		st.Members = append(st.Members, MemberStatus{Name: m.Name, Addr: m.Addr, Status: m.Status.String(), RTT: m.RTT})
	}
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

// MetricsHandler serves the node's Prometheus metrics. Values are read from
// the node's counters when scraped; nothing is counted twice on hot paths.
func (n *Node) MetricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&collector{n: n})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// Handler serves /metrics and /status.
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", n.MetricsHandler())
	mux.Handle("/status", n.StatusHandler())
	return mux
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
	descMembers     = prometheus.NewDesc("fastmq_members", "Gossip members by status.", []string{"status"}, nil)
)

type collector struct{ n *Node }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAppended, descOldest, descServedRecs, descServedBytes, descRequests, descParked,
		descDelivered, descAcked, descCommitted, descLagRecs, descLagSecs, descResets, descMembers} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.n.Status()
	for _, s := range st.Streams {
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
			ch <- prometheus.MustNewConstMetric(descCommitted, prometheus.GaugeValue, float64(p.Committed), l...)
			ch <- prometheus.MustNewConstMetric(descLagRecs, prometheus.GaugeValue, float64(p.LagRecords), l...)
			ch <- prometheus.MustNewConstMetric(descLagSecs, prometheus.GaugeValue, p.LagTime.Seconds(), l...)
			ch <- prometheus.MustNewConstMetric(descResets, prometheus.CounterValue, float64(p.Resets), l...)
		}
	}
	counts := map[string]int{}
	for _, m := range st.Members {
		counts[m.Status]++
	}
	for s, k := range counts {
		ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(k), s)
	}
}
