package fastmq

import (
	"github.com/fastmq/fastmq/internal/diskguard"
	"github.com/fastmq/fastmq/spool"
)

// DiskGuard limits what a node's spools may take of its host's disk
// (Config.DiskGuard): MaxBytes for the spools together, MinFreeBytes and
// MinFreePercent for the file system under DataDir, the Policy when one is
// reached, a WarnPercent high-water mark and the check Interval. The zero
// value refuses appends while the file system under DataDir has less than
// 5 % free. The limits are checked every Interval (default 1 s), not on
// every append, so the spools may overshoot by what is appended in one
// Interval; appends through a *spool.Log the caller got from Node.Stream
// are not checked.
type DiskGuard = diskguard.Limits

// DiskPolicy says what a node's disk guard does when a limit is reached.
type DiskPolicy = diskguard.Policy

// Disk policies.
const (
	// DiskRefuse refuses new appends (Publish, PublishAsync, Append) with
	// ErrDiskFull until space is freed. It is the default.
	DiskRefuse = diskguard.Refuse
	// DiskDropOldest deletes the oldest whole segments of the largest
	// streams until the limits hold again, whatever their retention and
	// whether consumers read them; appends are refused only when nothing
	// more can be dropped.
	DiskDropOldest = diskguard.DropOldest
)

// ErrDiskFull reports an append refused by the node's disk guard (see
// DiskGuard); the error says which limit was reached. Nothing of the
// refused records was written.
var ErrDiskFull = diskguard.ErrDiskFull

// DiskGuardStatus is the state of the node's disk guard, in Status.
type DiskGuardStatus = diskguard.Status

// streamLogs returns the node's open streams, for the disk guard.
func (n *Node) streamLogs() map[string]*spool.Log {
	open, _ := n.streams.Snapshot()
	return open
}
