package fastmq

import "github.com/fastmq/fastmq/patterns/group"

// InterestConfig configures interest retention (keep records until every
// consumer group acknowledged them) and the report of groups far behind
// (Config.Interest): Retain, the BehindRecords and BehindBytes thresholds
// and the CheckInterval of the log. See group.InterestConfig.
type InterestConfig = group.InterestConfig

// GroupBehind describes a consumer group far behind on one of this node's
// streams (see group.Behind).
type GroupBehind = group.Behind

// groupServer returns the node's group server, nil before it started.
func (n *Node) groupServer() *group.Server {
	n.groupsMu.Lock()
	defer n.groupsMu.Unlock()
	if n.groups == nil {
		return nil
	}
	return n.groups.srv
}

// interestFloor is a stream's spool.Config.RetentionFloor: the least floor
// of its groups.
func (n *Node) interestFloor(stream string) func() (uint64, bool) {
	return func() (uint64, bool) {
		if srv := n.groupServer(); srv != nil {
			return srv.RetentionFloor(stream)
		}
		return 0, false
	}
}

// GroupsBehind returns the consumer groups far behind on this node's
// streams (see InterestConfig), by stream and group.
func (n *Node) GroupsBehind() []GroupBehind {
	srv := n.groupServer()
	if srv == nil {
		return nil
	}
	return srv.Behind(n.Streams(), n.cfg.Interest)
}
