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
// Version 2 also carries the identity of the publisher's log and an
// epoch, so that a consumer never continues one log's offsets on another
// log, nor offsets the log handed out again after it lost its tail (see
// Log identity and epochs). Both headers grow by the same 20 bytes:
//
//	request frame 0, 42 bytes: the 22 bytes of version 1 | log id [16]byte | epoch u32
//	reply frame 0, 50 bytes:   the 30 bytes of version 1 | log id [16]byte | epoch u32
//
// A fetch's log id and epoch name the log and epoch of the consumer's
// position (the zero id when unknown, epoch 4294967295, NoEpoch, to skip
// the check). Every version 2 ok fetch reply carries the stream's log id
// and the epoch of the record before next, and its records all belong to
// that epoch (the server ends a reply at the end of the epoch of the
// requested offset). Two more statuses:
//
//   - 9 another log: the fetch names a log id other than the stream's, or
//     an epoch the stream's log never reached. The reply's log id and
//     epoch are the stream's current ones. Those offsets name other
//     records: the consumer must not continue them.
//   - 10 diverged: the fetch's epoch ended at next, below the requested
//     offset: the log lost the records from next up to the requested
//     offset, which the consumer had read, and their offsets name other
//     records now (or none yet). The reply's epoch is the request's. The
//     consumer continues at next.
//
// Version 2 is extended in place rather than becoming a version 3: it had
// not been released when these fields were added.
//
// Version negotiation: a server answers requests of versions 1 to 3, each
// in the request's version, and never sends statuses 7 or 8 in version 1:
// a version 1 fetch in a gap gets the batches after the gap as version 1
// servers sent them, and one at damage status 5 with the message. A
// request of any other version gets status 4 in version 1 (without the
// request's id). A version 2 consumer sends version 2; when a reply of
// status 4 comes in an older version, the publisher does not speak
// version 2, and the consumer speaks version 1 to it from then on (without
// gap or damage statuses it then stops at a gap, reporting a protocol
// error; without log ids and epochs, nothing protects it from another log
// under the same name or a cut tail, and it commits positions with the
// zero id). Version 3 consumers step down the same way, one version at a
// time (see Protocol, version 3).
//
// # Protocol, version 3
//
// Version 3 has the frames and fields of version 2, with version byte 3,
// and one more status:
//
//   - 11 forbidden: the server's ACL (ServerConfig.ACL) does not let this
//     client read the stream. The client is who the handshake
//     authenticated: a CURVE client's public key, a PLAIN user. Data is
//     ForbiddenMessage, e.g. `this client may not read stream "audit"`;
//     next, oldest and high are 0. The reply is the same whether the
//     stream exists or not (the check comes before the lookup), so a
//     client cannot probe for the names of streams it may not read. The
//     consumer stops pulling the stream from that publisher and reports
//     a *FetchError matching ErrForbidden through Next and Err.
//
// A request of version 1 or 2 that the ACL refuses gets status 4 (bad
// request) in its own version, with "forbidden: " and the same message:
// older consumers stop on it with a protocol error that carries it.
//
// # Protocol, version 4
//
// Version 4 has the fields and statuses of version 3, with version byte
// 4; a request has two more frames, the consumer's name and its node's
// (each 0..255 bytes of UTF-8, empty when not told):
//
//	frame 0: the version 2 request header, version byte 4
//	frame 1: stream name, 1..255 bytes
//	frame 2: consumer name (ConsumerConfig.Name), 0..255 bytes
//	frame 3: node name (ConsumerConfig.Node), 0..255 bytes
//
// Replies are those of version 3. The names decide nothing: the server
// lists its readers by them (Server.Clients: consumer, node, address,
// authenticated principal, the offset of the last fetch and the stream's
// end then), as nsqadmin lists a channel's clients; older requests are
// listed by their connection.
//
// Version 4 adds op 4, readers: the server's readers of the request's
// stream ("*": of every stream), as a JSON array of ClientStats in the
// reply's data, leaving out the streams the client may not list (the
// ACL's list grants, which read and admin include). A version 1 to 3 request of op 4 is malformed.
//
// A consumer sends version 4. A server that does not speak it answers
// status 4 in version 1 (see above); the consumer then steps down one
// version at a time (4, then 3, then 2, then 1), so a version 2 server is
// still spoken to in version 2.
//
// # Log identity and epochs
//
// Every spool has an identity and an epoch history (see package spool):
// a new epoch starts wherever the log may have lost records it had handed
// out, and (epoch, offset) never names two records. A consumer keeps, per
// publisher, the position (log id, epoch, next): the epoch is that of the
// last record it consumed. It sends it with every fetch and commits it
// with spool.OffsetStore.CommitPosition. The server checks it against the
// stream's log, as spool's ExampleLog_EpochEnd shows:
//
//  1. The log id is not the log's, or the log never reached the epoch
//     (spool.Log.EpochEnd says false): status 9, another log. The
//     consumer starts over on that publisher by its Start policy (the
//     first record from there is marked Message.Reset), logs a warning
//     naming both logs and counts it in PublisherStats.OtherLogs. It never
//     continues those offsets. A consumer also checks the log id of every
//     ok reply, so a log replaced while a fetch was parked is caught too.
//  2. The epoch ended at end < next: status 10, diverged. The records
//     [end, next) it read are gone; the consumer logs a warning with the
//     range, counts it in PublisherStats.Diverged and RecordsReplaced, and
//     continues at end (the first record marked Reset), still in its
//     epoch.
//  3. Otherwise the server serves from next, up to the end of that
//     record's epoch, stamped with its log id and the epoch of the record
//     before the reply's next.
//
// A position without an id but with an epoch (the zero id: an offsets
// file of version 1, or ConsumerConfig.ResumePosition from a sink that
// read from a version 1 publisher) is checked against that epoch (0 for
// old files) alone. A position the consumer does not have (a fresh start,
// ConsumerConfig.Resume's bare offsets) is sent with NoEpoch and not
// checked; the first reply tells the consumer the log and epoch, and
// nothing is committed before that.
package pull
