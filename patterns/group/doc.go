// Package group is consumer groups over FastMQ's spools: the members of a
// group share its records (a queue inside the group), every group gets
// every record (topics across groups), with leases, acknowledgements,
// redelivery with backoff and dead letters — and no broker.
//
// # Where the state lives
//
// Each publisher owns the group state of its own records: for every
// (stream, group) its Server keeps the group's cursor (the first offset
// never leased), the floor (every offset below is acknowledged or
// dead-lettered), the offsets settled above the floor as spans, and the
// pending records between floor and cursor: leased (member, deadline,
// delivery count) or available again (from a not-before time, for
// backoff and Nak delays). In Kafka share groups' terms the spans are
// acknowledged/archived, the pending records acquired or available, and
// the log from the cursor on available. Leases are ranges too: the
// records one fetch reads from the cursor and leases to one member are
// one lease run (member, deadline, what of it is acked), and acks by
// ranges (op 12) settle a run's part at once; only records naked,
// redelivered, delayed, queued behind their key or otherwise settled one
// by one are pending entries of their own.
//
// Members find every publisher of the stream by gossip (as pull's
// consumers do) and lease from each. A record is leased to one member at
// a time.
//
// # Durability (the crash rule)
//
// A group's state is a snapshot and a journal: the snapshot, a small
// versioned JSON file (Dir/<stream>/<group>.state), holds the floor, the
// cursor, the settled spans, the pending records with their delivery
// counts, the generation of the journal that holds the changes since and
// the stream's epoch it was written in (leases themselves are not kept);
// the journal (Dir/<stream>/<group>.<generation>.journal) is
// append-only, one checksummed entry per group commit, preallocated so
// that an entry's fdatasync need not commit a new file size. The
// internal package durable specifies both formats.
//
// One goroutine does the group commit: it appends the dead letters,
// writes one journal entry per changed group with one fdatasync, and only
// then answers the acknowledgements (and naks, terms) that changed it, so
// an ack a member was told succeeded is on disk. A new or reloaded group,
// a change of settings or a journal past 8 MiB gets a compaction instead:
// a new empty journal, then the snapshot naming it (written atomically),
// then the old journal is removed; a crash between leaves the old pair in
// force. Recovery reads the snapshot, then replays its journal. A damaged
// last entry with nothing valid after it is a torn write: it is copied
// aside (<journal>.torn), cut off and logged as a warning; damage
// followed by a valid entry, a journal of another generation or a
// missing one is an error (ErrJournalDamaged), never read as clean.
//
// A state that does not load (damaged other than a torn tail) is logged
// at ERROR and the group is answered StatusInternal on that publisher
// until Repair (fastmq group repair) rebuilds it from what is valid; a
// group whose state vanished (the publisher's Dir/groups.known says it
// wrote one) is logged at ERROR and waits for an operator's Seek rather
// than start again from its start position, which would deliver again
// what it had acknowledged.
//
// After a publisher crash the rule is: every record whose acknowledgement
// was confirmed to a member is never redelivered; the records redelivered
// are exactly those that were leased and not confirmed-acknowledged at the
// crash (pending at the last write, or leased after it); they come back at
// once with their delivery counts.
//
// A record is leased as soon as the publisher has written it to the
// stream's file, before its fdatasync (spool.Reader.ReadWritten), as a
// broker delivers what is in its page cache, so that a stalled fdatasync
// does not hold up delivery; ServerConfig.LeaseAfterSync (a node's
// --group-lease-after-sync) waits for it. Its publisher is acknowledged
// only once it is durable either way, and a process crash loses nothing:
// the OS keeps what was written.
//
// A group follows its stream's epochs. Because it leases records before
// their fdatasync (or the stream serves them so,
// spool.Config.VisibleBeforeSync), a group can lease and acknowledge
// records that an OS crash then takes from the stream, which reopens at
// its durable end in a new epoch; new records take the lost offsets. A
// group state loaded from disk is cut back to the end of the epoch its
// snapshot names (and to the end of the log), so the group delivers those
// new records rather than taking them for the lost ones it had settled;
// Floors reports the cut floor. The lost records are not delivered again:
// they are gone. A failed fdatasync in a running process is the same
// case, without a crash: the stream fails every append of the groups it
// covered, yet members may already hold those records; the stream
// accepts nothing more until it is reopened, in a new epoch.
//
// # Semantics and defaults
//
//   - AckWait (default 30 s): a lease's length, counted from when the
//     publisher leases the record to the member. The member holds
//     leased records in a buffer (MemberConfig.Buffer, default 64
//     records in all plus one per publisher: the one per publisher
//     keeps a fetch waiting at every publisher while Next waits) until
//     Next hands them out; while a record waits there, the member
//     extends its lease every AckWait/16, batched, so that no record
//     runs out unprocessed and its handler has at least 29/32 of
//     AckWait from when it takes it. That holds for an AckWait of
//     160 ms or more (the member looks no more often than every 5 ms), within
//     MaxLeaseFactor: InProgress extends a lease by AckWait, up to
//     MaxLeaseFactor (10) AckWaits from the lease's start, and the
//     buffer's extensions count towards that cap. The member times them
//     by its own AckWait: in a group whose members differ in AckWait,
//     the group's is the one it was created or configured with, and a
//     member with a longer one may see its buffered records run out
//     (give the members of a group one AckWait). A publisher holds
//     AckWait to [MinAckWait, MaxAckWait] (100 ms to an hour). Extending a record leased as
//     part of a run of offsets costs the publisher an entry of its own
//     for that record from then on (as InProgress does).
//   - MaxDeliver (default 5, unlimited with -1): a record that ran out
//     its lease or was naked after its MaxDeliver-th delivery is
//     dead-lettered.
//   - Backoff: the redelivery delay after the n-th failed delivery (the
//     last value repeats; default none). Nak(delay) overrides it.
//   - MaxAckPending (default 1000): the leases one member holds on one
//     publisher, each member its own, at most the publisher's
//     ServerConfig.MaxMemberLeases (default 16384).
//   - A group has at most ServerConfig.MaxMembers members (default 256)
//     on a publisher: a member beyond is refused with status 8 (limit
//     reached) and asks again later. A member counts while it holds
//     leases, has a fetch waiting, or spoke within MaxWait plus AckWait
//     with its connection open. ServerConfig.MemberLimit may bound, the
//     same way, the members of one client (its key) in a group.
//   - AckWait, MaxDeliver and Backoff are the group's, on each
//     publisher, kept in its state: those of the fetch that created the
//     group there. A member's fetch never changes them (a member joining
//     with a 1 ms AckWait would have every other member's leases run
//     out; the publisher logs, once per member, one asking for others):
//     only an operator's Configure (op 13, `fastmq group configure`)
//     does.
//   - Term(reason): dead-letter now.
//   - Dead letters are appended, on the same publisher, to the ordinary
//     stream <stream>.<group>.dlq (DLQStream) with the record's headers
//     and fastmq-dlq-stream, -offset, -group, -deliveries and -reason,
//     and why: -last-reason, the handler's last reason (a nak's or
//     term's text; Run naks with the handler's error), and -history,
//     the record's last failed deliveries as JSON (member, lease time,
//     end, outcome: nak, expired, term, member gone or left; reason).
//     The history is kept in memory: a publisher restart begins it anew.
//     Replay (op 11) gives dead letters back to their group only: their
//     records are made pending again in the group's state, at their own
//     offsets (the floor moves back to the first), and the dead letters
//     replayed are noted in the same snapshot, so each is replayed once.
//   - A member that leaves (Shutdown) has its leases released at once, as
//     no failed delivery: its records go to other members even past
//     MaxDeliver. One on a node gossip reports failed or left too (as
//     a failed delivery: at MaxDeliver, a dead letter): a node running members
//     advertises MemberService, and a server with ServerConfig.Watch
//     releases on the node's Removed event (failed or left), with a slow
//     look at the member list (every 5 s) as a safety net; a server with
//     only ServerConfig.Members looks every MemberCheck, 200 ms.
//     A member id is bound, in each group on each publisher, to the
//     connection that first used it (its routing identity, and the
//     CURVE key or PLAIN name its handshake proved, which pull.Server's
//     PeerCredentials tells): a request with the id from another
//     connection is refused (status 6, unavailable) until the bound one
//     is gone, and then taken only with the same key (a member that
//     reconnects); a leave or the member's node gone unbinds it.
//     A member id is "node/incarnation.random" (MemberConfig.Name and
//     Incarnation): a request from a member of a node with another
//     incarnation than the last seen tells the node was restarted, and
//     the old incarnation's leases are released at once, even when
//     gossip took the restart for the same process (back within
//     FailedGrace at the same address).
//     Otherwise leases run out after AckWait.
//   - Seek (op 8) moves a group's cursor on one publisher: every lease
//     and pending redelivery there is dropped (a later settle of one is
//     refused, code 2), the records before the position count as
//     settled (skipped, not dead-lettered), the records from it on are
//     delivered anew.
//   - Start of a new group: earliest (default), latest, an offset, a time.
//   - Delayed delivery: a record with the header fastmq-not-before (Unix
//     milliseconds, NotBefore) is not leased before then; the records
//     behind it go on.
//   - Ordered groups (MemberConfig.Ordered, fixed when the group is
//     created): records with the same fastmq-key header (Key) are never
//     in flight to two members at once and are leased in offset order;
//     different keys go in parallel, records without a key as in any
//     group. A failing record is retried in place (its key waits) up to
//     MaxDeliver, then dead-lettered, so one bad record cannot block its
//     key forever. After a publisher restart the key queues are rebuilt
//     by reading the pending records. Without Ordered a member may get a
//     publisher's records out of offset order (it keeps two fetches open
//     per publisher, and redeliveries come when they are due).
//
// Delivery is at least once: a record is processed again only if its
// lease ended (timeout, nak, member gone, publisher crash) before the ack
// was confirmed.
//
// # Protocol
//
// Members and operators talk to a publisher's group Server through its
// spool server (see Register), in a protocol of its own, whose version
// byte says what a peer speaks: the request and reply frames are
// specified in the internal package wire. A publisher answers a request
// of another version with StatusUnsupported.
package group
