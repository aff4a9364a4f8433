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
// A consumer crosses gaps a publisher's log really has (offsets spool
// repair removed) and counts them; it never skips data that is only
// unreadable (unrepaired damage): it delivers the records before the
// damage and stops that publisher. A publisher stopped for good is
// reported through Next, once, as a *FetchError, while the other
// publishers go on; see Consumer for the rule.
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
//
// # Protocol, version 2
//
// Version 2 has the frames and fields of version 1, with version byte 2,
// and two more statuses. A server checks the length, checksum and offsets
// of every stored batch before it sends it (it still does not decompress
// them), so an ok reply holds only batches whose checksums are valid, dense
// from the batch holding the requested offset; damage ends the data before
// the damaged batch. Then:
//
//   - 7 gap: the records from the requested offset up to next do not exist
//     in the log (spool repair removed them; the offset is within [oldest,
//     next) but the first stored batch after it starts at next). Data says
//     so in words, e.g. "records from 580 to 589 do not exist in the log".
//     The consumer goes on at next.
//   - 8 damaged: the stored batch holding the requested offset is damaged
//     on the publisher's disk (data says how); next is the requested offset.
//     Nothing there can be served until the spool is repaired.
//
// Version negotiation: a server answers requests of version 1 and 2, each
// in the request's version, and never sends statuses 7 or 8 in version 1:
// a version 1 fetch in a gap gets the batches after the gap as version 1
// servers sent them, and one at damage status 5 with the message. A
// request of any other version gets status 4 in version 1 (without the
// request's id). A consumer sends version 2; when a reply of status 4
// comes in an older version, the publisher does not speak version 2, and
// the consumer speaks version 1 to it from then on (without gap or damage
// statuses it then stops at a gap, reporting a protocol error).
package pull
