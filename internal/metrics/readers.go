package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fastmq/fastmq/patterns/pull"
)

var (
	readerLabels   = []string{"stream", "consumer", "node"}
	descReaderLag  = prometheus.NewDesc("fastmq_reader_lag_records", "A reader of the node's spool server, as the server saw it: the stream's next offset minus the reader's position, at its last fetch.", readerLabels, nil)
	descReaderSeen = prometheus.NewDesc("fastmq_reader_last_fetch_seconds", "Unix time of a reader's last fetch from the node's spool server.", readerLabels, nil)
	descReaderPos  = prometheus.NewDesc("fastmq_reader_position", "The offset of a reader's last fetch from the node's spool server.", readerLabels, nil)
	readerDescs    = []*prometheus.Desc{descReaderLag, descReaderSeen, descReaderPos}
)

// collectReaders exports the named readers of the node's spool server
// (consumers of protocol version 4; older ones, known by connection
// only, are left out to bound the series).
func collectReaders(ch chan<- prometheus.Metric, rs []pull.ClientStats) {
	for _, r := range rs {
		if r.Consumer == "" && r.Node == "" {
			continue
		}
		l := []string{r.Stream, r.Consumer, r.Node}
		lag := 0.0
		if r.High > r.Position {
			lag = float64(r.High - r.Position)
		}
		ch <- prometheus.MustNewConstMetric(descReaderLag, prometheus.GaugeValue, lag, l...)
		ch <- prometheus.MustNewConstMetric(descReaderSeen, prometheus.GaugeValue, float64(r.LastFetch.UnixNano())/1e9, l...)
		ch <- prometheus.MustNewConstMetric(descReaderPos, prometheus.GaugeValue, float64(r.Position), l...)
	}
}
