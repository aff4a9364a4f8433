// Package pull is FastMQ's core pattern: publishers keep their records in a
// local spool and serve them; consumers discover every publisher of a stream
// and pull from each with their own recorded offsets.
//
// # Server
//
// A Server binds a ROUTER socket and answers fetch requests for the spools
// its Lookup function knows. Data already on disk is sent at once, as the
// stored batches lie on disk (still compressed; the server never decodes or
// re-encodes them). A fetch at the tail is parked until the spool grows or
// the fetch's wait ends (long polling); one goroutine per stream with parked
// fetches waits on the spool, and one timer goroutine ends expired waits.
// Nothing is sent that was not asked for, so a slow consumer costs the
// publisher nothing but the disk its backlog occupies.
//
// # Consumer
//
// A Consumer watches discovery for the publishers of its stream (or takes a
// static list) and runs one fetcher per publisher, each with its own DEALER
// socket. A fetcher keeps one request in flight while the records of the
// previous reply are delivered, so fetching overlaps delivery. Records of
// one publisher are delivered in offset order; Ack marks them processed and
// the contiguous acknowledged prefix is committed to a spool.OffsetStore
// every CommitInterval and on Close. Delivery is at least once: a restarted
// consumer resumes at its last commit.
//
// # Protocol, version 1
//
// Requests and replies are two ZeroMQ frames after the ROUTER envelope. All
// integers are big-endian.
//
// Request:
//
//	frame 0, 22 bytes: version u8 (1) | op u8 | id u32 | offset u64 | max bytes u32 | max wait ms u32
//	frame 1: stream name, 1..255 bytes
//
// Ops: 1 fetch (records from offset), 2 meta (oldest and next offsets),
// 3 seek-time (offset holds Unix nanoseconds; the reply's next is the first
// offset at or after that time).
//
// Reply:
//
//	frame 0, 30 bytes: version u8 (1) | status u8 | id u32 | next u64 | oldest u64 | high u64
//	frame 1: data
//
// The id echoes the request's, so a consumer can drop stale replies after a
// retry. For a fetch with status 0 (ok), data is zero or more whole spool
// batches (see package spool for their format) starting with the batch that
// holds the requested offset (records before it are skipped by the
// consumer), next is the offset after the last record sent, and high the
// stream's next offset (high-next is the consumer's lag). An empty ok reply
// means the wait ended with no new data. Error statuses carry a UTF-8
// message in data: 1 unknown stream, 2 offset out of range (below the oldest
// retained offset or beyond the end of the log; oldest and high say where
// the log is), 3 too large, 4 bad request (malformed or another version),
// 5 internal error, 6 unavailable (server closing). A server answers a
// request of another version with status 4.
package pull
