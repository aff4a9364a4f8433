package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fastmq/fastmq/patterns/group"
)

var (
	groupLabels       = []string{"stream", "group"}
	descGrpDelivered  = prometheus.NewDesc("fastmq_group_delivered_total", "Leases given to a group's members (first deliveries and redeliveries).", groupLabels, nil)
	descGrpRedeliv    = prometheus.NewDesc("fastmq_group_redelivered_total", "Leases of records delivered to the group before.", groupLabels, nil)
	descGrpAcked      = prometheus.NewDesc("fastmq_group_acked_total", "Records a group's members acknowledged.", groupLabels, nil)
	descGrpNaked      = prometheus.NewDesc("fastmq_group_naked_total", "Records a group's members naked (redelivery asked for).", groupLabels, nil)
	descGrpExpired    = prometheus.NewDesc("fastmq_group_expired_total", "Leases that ran out (AckWait).", groupLabels, nil)
	descGrpReleased   = prometheus.NewDesc("fastmq_group_released_total", "Leases released because their member left or its node failed.", groupLabels, nil)
	descGrpDeadTotal  = prometheus.NewDesc("fastmq_group_dead_lettered_total", "Records dead-lettered since the node started.", groupLabels, nil)
	descGrpDeadRecs   = prometheus.NewDesc("fastmq_group_dead_letter_records", "Records in the group's dead-letter stream on this node.", groupLabels, nil)
	descGrpInFlight   = prometheus.NewDesc("fastmq_group_in_flight", "Records leased to a member and not settled.", groupLabels, nil)
	descGrpPending    = prometheus.NewDesc("fastmq_group_pending", "Records in flight or waiting for a redelivery.", groupLabels, nil)
	descGrpMembers    = prometheus.NewDesc("fastmq_group_members", "Members holding leases.", groupLabels, nil)
	descGrpActive     = prometheus.NewDesc("fastmq_group_active_members", "Live members: holding leases or waiting in a fetch.", groupLabels, nil)
	descGrpLagRecords = prometheus.NewDesc("fastmq_group_lag_records", "Records of the stream the group has not settled (acknowledged or dead-lettered).", groupLabels, nil)
	descGrpLagSecs    = prometheus.NewDesc("fastmq_group_lag_seconds", "Age of the oldest record the group has not settled.", groupLabels, nil)
	groupDescs        = []*prometheus.Desc{descGrpDelivered, descGrpRedeliv, descGrpAcked, descGrpNaked, descGrpExpired,
		descGrpReleased, descGrpDeadTotal, descGrpDeadRecs, descGrpInFlight, descGrpPending, descGrpMembers, descGrpActive,
		descGrpLagRecords, descGrpLagSecs}
)

// collectGroups exports the node's consumer groups.
func collectGroups(ch chan<- prometheus.Metric, gs []group.GroupStats) {
	for _, g := range gs {
		l := []string{g.Stream, g.Group}
		c := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
		}
		v := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
		}
		c(descGrpDelivered, g.Delivered)
		c(descGrpRedeliv, g.Redelivered)
		c(descGrpAcked, g.Acked)
		c(descGrpNaked, g.Naked)
		c(descGrpExpired, g.Expired)
		c(descGrpReleased, g.Released)
		c(descGrpDeadTotal, g.DeadLetters)
		v(descGrpDeadRecs, float64(g.DeadLettered))
		v(descGrpInFlight, float64(g.InFlight))
		v(descGrpPending, float64(g.Pending))
		v(descGrpMembers, float64(g.Members))
		v(descGrpActive, float64(g.Active))
		v(descGrpLagRecords, float64(g.Lag))
		v(descGrpLagSecs, g.LagTime.Seconds())
	}
}
