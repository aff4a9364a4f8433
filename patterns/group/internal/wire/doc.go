// Package wire is the consumer group protocol's codec: the requests
// members and operators send to a publisher's group Server and its
// replies. This comment is the protocol's specification.
//
// # Protocol, version 0x82
//
// Group requests go to the publisher's spool server (its ROUTER socket);
// their first byte, 0x82, is outside the pull protocol's versions, and
// the spool server hands them to the group Server (pull.Server's
// HandleVersion, through group.Register). All integers are
// big-endian.
//
// Request, five frames:
//
//	frame 0, 38 bytes: version u8 (0x82) | op u8 | id u32 | max records u32 | max bytes u32 |
//	                   wait ms u32 | ack wait ms u32 | max deliver u16 | max ack pending u32 |
//	                   start u8 | start value u64 | flags u8 (1: ordered by key, 2: frames, 4: pipeline, 8: lazy, 16: stream)
//	frame 1: stream; frame 2: group; frame 3: member id (each 1..255 bytes)
//	frame 4: body
//
// Ops: 1 fetch (lease up to max records and about max bytes, waiting up
// to wait ms when nothing is available; the body is the backoff list,
// n x u32 ms, n <= 32; the semantics fields ack wait, max deliver and
// the backoff are the group's if this fetch creates it, and are ignored
// otherwise); 2 ack, 3 nak, 4 in progress, 5 term: the body is 1..256
// entries, each offset u64 | delivery u32 | delay ms u32 | reason length
// u8 | reason (a lease is named by offset and delivery); 6 leave (empty
// body): release every lease of the member; 7 info (empty body): the
// group's state on this publisher, as JSON GroupStats in the reply's
// data; 8 seek (empty body): move the group's cursor to the header's
// start and start value (earliest, latest, offset, time, within what the
// publisher holds; see Semantics), answered, empty, once the moved state
// is written. Ops 2 to 8 never create a group. Operators' ops (empty
// body; member frame any name): 9 list: the groups of the stream frame's
// stream ("*": of every stream) this publisher has state for, as JSON
// []GroupStats; 10 dead letters: up to max records of the group's
// dead-letter stream from start value, in a fetch reply's format (delivery
// 0); 11 replay: give the dead letters [start value, start value + max
// records) (0: to the end) back to their group: each one's record is made
// pending again in the group's state, at its own offset (only this group
// gets it again; the stream gets no record), skipping those replayed
// before (kept in the group's state, written with the reopened records,
// and in the older Dir/<stream>/<group>.replayed, version 1, still read),
// answered with JSON ReplayResult; one replay at a time
// (unavailable otherwise). Ops 10 and 11 answer unknown for a group
// without a dead-letter stream.
// 12 ack ranges: the body is 1..256 ranges, each offset u64 | count
// u32 | delivery u32 (count >= 1, at most 65536 acks in all), acking the
// leases of count consecutive offsets of that delivery — members send
// their acks this way, refusals are reported per offset as for op 2.
// 13 configure (an operator's; the body is a backoff list, as a
// fetch's): make the header's ack wait (held to 100 ms .. 1 h; 0: 30 s)
// and max deliver and the body's backoff the group's settings, answered,
// empty, once written; the only op that changes them once the group
// exists.
//
// Versions: 0x81 was the protocol before its flags 2 to 16 were
// certain, when a member learnt which ones a publisher knew from bad
// requests; every 0x82 publisher honours them all, so a member sets them
// (frames, pipeline, stream on every fetch; lazy on its lazy settles)
// without asking, and acknowledges by ranges (op 12). A request of 0x81
// (or of another version, handed to a Server) is answered status 11
// (unsupported), in a reply header of its own version byte, so an old
// member reports it.
//
// Reply, two frames:
//
//	frame 0, 10 bytes: version u8 (0x82) | status u8 | id u32 | count u32
//	frame 1: data
//
// A fetch with flag 2 (frames, FlagFrames) may get its ok data in several
// frames 1, 2, ... of about FrameBytes each, every one holding whole
// records: the receiver reads each into a small buffer instead of one
// large frame.
//
// A fetch with flag 4 (pipeline, FlagPipeline) says the member keeps two
// fetches open: the publisher parks up to two of its fetches (without the
// flag one; a newer fetch beyond that answers the oldest parked one
// empty), so that a record appended while one reply travels is leased at
// once on the other.
//
// A settle request (ops 2 to 5 and 12) with flag 8 (lazy, FlagLazy) says
// the member does not wait for its answer to go on: the publisher may
// hold it up to its LazyCommit (5 ms by default) so that one group commit
// takes many requests; it is still answered only once on disk. A request
// without the flag is committed at once, with the lazy ones that wait.
// Run's settles are lazy; a Message method's are not, nor the extensions
// of the leases of records waiting in a member's buffer (op 4, progress),
// so that they arrive before those leases end.
//
// A fetch with flag 16 (stream, FlagStream) stays open after a reply
// that took every record there was with room for more (no limit cut it:
// its count, its bytes or MaxAckPending): that reply has status 10
// (open), and the publisher keeps the fetch parked for the rest of its
// count and of its max bytes (which bound all its replies together),
// answering it again as records come, until a reply uses them or is cut
// by a limit, its wait ends, a newer fetch of the member displaces it,
// or the member leaves or is gone; that last reply has status 0,
// possibly with no records. A member getting records one or a few at a
// time then sends a fetch per half buffer, not per reply.
//
// Statuses: 0 ok; 1 unknown stream or group (settling for a group the
// publisher never had); 4 bad request; 8 limit reached: a member beyond
// the group's most members (the publisher's MaxMembers) is refused; 5 internal (the state could not be
// written: the change is not confirmed); 6 unavailable; 7 partial: data
// lists the refused entries, count x (offset u64 | code u8), code 1 the
// lease is not this member's (it ran out and moved) and 2 the offset is
// not pending (settled, or never leased); the other entries were applied;
// 9 forbidden: the spool server's access control does not let the client
// read the stream (the same answer whether the stream exists or not);
// 10 open: a stream fetch's records, the fetch stays open; 11
// unsupported: the request's version is not the publisher's (see
// Versions).
// A fetch's ok (or open) data holds count records, each offset u64 | delivery u32 |
// time ns u64 | header count u16 | per header: key length u16, key, value
// length u32, value | value length u32 | value. An empty ok reply: the
// wait ended. Decoders check every length before allocating.
package wire
