// Package durable is a consumer group's state on its publisher, and its
// on-disk format: a snapshot and a journal per (stream, group). This
// comment is the format's specification; the group package's doc says
// what the state means and when it is written (its "Durability").
//
// The live State of a group (floor, cursor, settled spans, pending
// records, lease runs) is the publisher's Server's: its mutex guards it.
// The journal bookkeeping in it (what changed since the last commit) is
// written by the Server's group commit, through Changes, Snapshot,
// Journal and Write.
//
// # Snapshot
//
// Dir/<stream>/<group>.state, written atomically (temporary file, fsync,
// rename, directory fsync) with a format version (FileVersion, 3) in
// front, as every small state file of the project:
//
//	version 1: {"stream", "group", "settings": {"ack_wait", "max_deliver", "backoff", "ordered"},
//	            "floor", "next", "done": [{"From", "To"}...], "pending": [[from, to, deliveries]...]}
//	version 2: version 1 plus "journal" (the generation of the journal that holds the
//	            changes since) and "log_epoch" (the stream's epoch it was written in)
//	version 3: version 2 plus "replayed": [{"From", "To"}...], the offsets of the group's
//	            dead-letter stream replayed to it (their records made pending again)
//
// floor: every offset below is acknowledged or dead-lettered; next: the
// cursor, the first offset never leased; done: the settled spans above
// the floor, ascending, [From, To); pending: the pending records as runs
// of equal delivery counts. Leases are not kept: after a restart every
// pending record is available at once, with its delivery count. A
// snapshot of version 1 has no journal.
//
// # Journal
//
// Dir/<stream>/<group>.<generation, 16 hex digits>.journal, append-only.
// All integers are big-endian.
//
//	header, 24 bytes: magic "FMQJ" | version u16 (1) | reserved u16 | generation u64 |
//	                  CRC32C of the 16 bytes before u32 | reserved u32
//	entry:            payload length u32 | CRC32C of the length and the payload u32 | payload
//	payload:          cursor u64 | settled span count u32 | delivery run count u32 |
//	                  settled spans, each from u64 | to u64 |
//	                  delivery runs, each from u64 | to u64 | deliveries u32
//
// One entry per group commit (Entry), at most MaxEntryLen bytes of
// payload. Spans are ascending and below the cursor; the records from
// the previous cursor on that no span settles are pending, delivered
// once unless a run gives their count (a redelivery, or a record read
// but not leased yet: 0).
//
// The journal is preallocated: zeros are written ahead of its entries
// (64 KiB at its creation, then as much as it holds, at most 1 MiB at a
// time), so that an entry's fdatasync overwrites blocks the file has and
// need not commit a new file size; zeros where an entry would begin are
// the journal's end. (A build from before the preallocation reads that
// zero tail as a torn one: it logs a warning and cuts it, losing
// nothing.)
//
// A journal past JournalLimit (8 MiB) is compacted by the next commit:
// a new empty journal of the next generation, then the snapshot naming
// it, then the old journal is removed (RemoveOtherJournals); a crash
// between leaves the old pair in force.
//
// # Recovery
//
// Load reads the snapshot, then replays its journal. A damaged last
// entry with nothing valid after it is a torn write: it is copied aside
// (<journal>.torn), cut off and reported (Recovery); damage followed by
// a valid entry, a journal of another generation or a missing one is an
// error (ErrJournalDamaged), never read as clean. A state loaded is then
// cut back to the end of the stream's epoch its snapshot names
// (FollowEpoch).
//
// A state Load refuses stays on disk as it is until Repair (run with the
// publisher stopped): the damaged files go to
// Dir/<stream>/quarantine/<name>.<unix time>; a valid snapshot is kept
// with the journal entries before the first damage, written as a new
// snapshot naming an empty journal of the next generation; without a
// valid snapshot no state is left.
//
// # Known groups
//
// Dir/groups.known (version 1, a versioned JSON list of "stream/group")
// names every group whose snapshot the server wrote once, so that a
// state that vanished is told from a group never seen (the group
// package's Server then waits for an operator's seek).
package durable
