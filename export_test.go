package fastmq

// CheckGroupsBehind looks for groups far behind now, as the node's watch
// does every Interest.CheckInterval, and logs the changes.
func (n *Node) CheckGroupsBehind() { n.interest.Check() }
