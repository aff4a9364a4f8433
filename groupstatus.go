package fastmq

import (
	"time"

	"github.com/fastmq/fastmq/internal/metrics"
	"github.com/fastmq/fastmq/patterns/group"
)

// GroupStatus describes one consumer group of one of the node's streams,
// on this node as its publisher (see group.GroupStats): the state now, and
// counters since the node started.
type GroupStatus struct {
	Stream string `json:"stream"`
	Group  string `json:"group"`
	// Floor: every record below is acknowledged or dead-lettered; Cursor:
	// the first record never delivered; High: the stream's next offset.
	Floor  uint64 `json:"floor"`
	Cursor uint64 `json:"cursor"`
	High   uint64 `json:"high"`
	// Pending records are in flight (leased to a member) or waiting for
	// a redelivery.
	Pending  int `json:"pending"`
	InFlight int `json:"in_flight"`
	Waiting  int `json:"waiting"`
	Members  int `json:"members"` // members holding leases
	// LagRecords are the records not settled yet; LagTime the age of the
	// oldest of them.
	LagRecords uint64        `json:"lag_records"`
	LagTime    time.Duration `json:"lag_time_ns"`
	// Counters since the node started.
	Delivered   uint64 `json:"delivered"`
	Redelivered uint64 `json:"redelivered"`
	Acked       uint64 `json:"acked"`
	Naked       uint64 `json:"naked"`
	Expired     uint64 `json:"expired"`  // leases that ran out
	Released    uint64 `json:"released"` // leases of members that left or failed
	DeadLetters uint64 `json:"dead_letters"`
	// DeadLettered is the records in the group's dead-letter stream on
	// this node, over its life.
	DeadLettered uint64 `json:"dead_lettered"`
	// The group's settings as its members last asked for them.
	AckWait    time.Duration `json:"ack_wait_ns"`
	MaxDeliver int           `json:"max_deliver"`
	Ordered    bool          `json:"ordered,omitempty"`
}

// GroupStatusOf converts a group server's stats for Status.
func GroupStatusOf(st group.GroupStats) GroupStatus {
	return GroupStatus{Stream: st.Stream, Group: st.Group, Floor: st.Floor, Cursor: st.Next, High: st.High,
		Pending: st.Pending, InFlight: st.InFlight, Waiting: st.Available, Members: st.Members,
		LagRecords: st.Lag, LagTime: st.LagTime,
		Delivered: st.Delivered, Redelivered: st.Redelivered, Acked: st.Acked, Naked: st.Naked,
		Expired: st.Expired, Released: st.Released, DeadLetters: st.DeadLetters, DeadLettered: st.DeadLettered,
		AckWait: st.AckWait, MaxDeliver: st.MaxDeliver, Ordered: st.Ordered}
}

// groupStatuses lists the node's groups, sorted by stream and group (nil
// before the group server started).
func (n *Node) groupStatuses() []GroupStatus {
	n.groupsMu.Lock()
	h := n.groups
	n.groupsMu.Unlock()
	if h == nil {
		return nil
	}
	list := h.srv.List()
	out := make([]GroupStatus, len(list))
	for i, st := range list {
		out[i] = GroupStatusOf(st)
	}
	return out
}

// groupMetrics converts the groups of a Status for the metrics collector.
func groupMetrics(gs []GroupStatus) []metrics.Group {
	out := make([]metrics.Group, len(gs))
	for i, g := range gs {
		out[i] = metrics.Group{Stream: g.Stream, Group: g.Group, Delivered: g.Delivered, Redelivered: g.Redelivered,
			Acked: g.Acked, Naked: g.Naked, Expired: g.Expired, Released: g.Released, DeadLetters: g.DeadLetters,
			DeadLettered: g.DeadLettered, InFlight: g.InFlight, Pending: g.Pending, Members: g.Members,
			LagRecords: g.LagRecords, LagTime: g.LagTime}
	}
	return out
}
