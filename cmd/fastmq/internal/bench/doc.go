// Package bench is the measuring harness behind `fastmq bench`: socket
// throughput and latency (Socket: pushpull, pubsub, reqrep, in one process
// or with the receiving end in a child process, optionally beside libzmq's
// figure), spool append and read throughput (Spool), the end-to-end
// pull path (Pull) and consumer groups with member processes (Group).
// The fastmq command owns the flags and the cobra wiring; this package
// owns the runs and the figures they print; the statistics and the
// member processes' protocol are internal/benchkit's, which the
// comparisons with other systems in benchcmp/ share.
//
// A run in separate processes re-executes the running binary as
// `fastmq bench PATTERN --role recv ...` (`fastmq bench group --role
// member ...`), so it works only inside the fastmq command (or a test
// binary acting as it).
package bench
