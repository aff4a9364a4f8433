// Package demo is `fastmq demo`: a small log-shipping mesh on loopback —
// shipper processes following access logs being written, a collector and
// an independent consumer — with a shipper and the collector killed with
// SIGKILL midway, and a line-by-line check at the end that every produced
// line was collected exactly once.
//
// The shipper and collector processes are the running binary re-executed
// as `fastmq ship` and `fastmq collect`, so Run works only inside the
// fastmq command (or a test binary acting as it, see Options.ChildEnv).
package demo
