package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fastmq/fastmq/patterns/group"
)

// DownPublisher is a publisher of the mesh that is down, as the console
// serving the metrics last saw it: its streams and consumer groups with
// their last known offsets and lag, kept until it comes back or an
// operator forgets it.
type DownPublisher struct {
	Name    string
	Since   time.Time // when it was first found down
	Streams []Stream
	Groups  []group.GroupStats
}

var (
	descDownSince   = prometheus.NewDesc("fastmq_publisher_down_since_seconds", "Unix time since which a publisher of the mesh is down, as the console serving these metrics saw it; the series stays until the publisher is back or forgotten (fastmq members --forget).", []string{"publisher"}, nil)
	descDownRecords = prometheus.NewDesc("fastmq_down_publisher_stream_records", "Records of a down publisher's stream, as last known (next minus oldest offset).", []string{"publisher", "stream"}, nil)
	descDownGrpLag  = prometheus.NewDesc("fastmq_down_publisher_group_lag_records", "Records of a down publisher's stream the group had not settled, as last known.", []string{"publisher", "stream", "group"}, nil)
	downDescs       = []*prometheus.Desc{descDownSince, descDownRecords, descDownGrpLag}
)

// collectDown exports the down publishers' last known state.
func collectDown(ch chan<- prometheus.Metric, down []DownPublisher) {
	for _, p := range down {
		ch <- prometheus.MustNewConstMetric(descDownSince, prometheus.GaugeValue, float64(p.Since.UnixNano())/1e9, p.Name)
		for _, s := range p.Streams {
			if !s.Failed && s.Next >= s.Oldest {
				ch <- prometheus.MustNewConstMetric(descDownRecords, prometheus.GaugeValue, float64(s.Next-s.Oldest), p.Name, s.Name)
			}
		}
		for _, g := range p.Groups {
			ch <- prometheus.MustNewConstMetric(descDownGrpLag, prometheus.GaugeValue, float64(g.Lag), p.Name, g.Stream, g.Group)
		}
	}
}
