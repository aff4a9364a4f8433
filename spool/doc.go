// Package spool is FastMQ's durable, compressed, segmented log: one append-only
// log per stream, stored in a directory of segment files, that never loses a
// record it has acknowledged as durable.
//
// # Using it
//
// [Open] takes an exclusive lock on the directory (a second writer gets
// [ErrLocked]), recovers the tail and starts the single writer. [Log.Append]
// assigns dense offsets and returns when the records are durable according to
// [Config.Sync]. [OpenReadOnly] opens the same directory without the lock, any
// number of times, while a writer keeps appending. Read with [Log.NewReader]
// (follows the tail), [Log.ReadRaw] plus [DecodeBatches] (whole stored batches,
// still compressed, for serving over the network), and [Log.SeekTime].
// Retention ([Config.RetentionAge], [Config.RetentionBytes], [Log.SetFloor])
// removes whole segments; [Config.RetentionFloor] keeps what an owner (a
// node's consumer groups) still wants. Headers [HeaderMsgID] and
// [HeaderProducer] make an append idempotent (see Idempotent appends).
// [Verify] and [Repair] check and fix a directory;
// [OffsetStore] keeps consumers' committed positions crash-safely. Every log
// has an identity ([Log.ID]) and an epoch history ([Log.Epoch],
// [Log.EpochEnd], [Log.EpochOf]) that a pull server and its consumers use to
// never take one log's offsets for another's, nor an offset handed out again
// after lost records for the one they read; [Log.Recovery] says what Open
// recovered and lost.
//
// # On-disk format, version 1
//
// All integers are little-endian. CRC means CRC-32C (Castagnoli).
//
// A stream directory holds:
//
//	LOCK                         flock(2)-ed by the one writer; holds its pid
//	meta.json                    the log's identity, epoch history and
//	                             recovery checkpoint (see Identity and epochs)
//	dedup.json                   producers' last sequences (see Idempotent
//	                             appends); absent until a producer appends
//	<base>.seg                   segment files; <base> is the offset of the first
//	                             record, zero-padded to 20 decimal digits, so
//	                             sorting the names sorts the log
//	quarantine/                  tails cut by recovery (<segment>.torn-<pos>-<ns>),
//	                             segments moved aside by Repair
//	                             (<segment>.damaged-<ns>), and gap markers
//	                             <from>-<to>.gap (20 digits each) naming offsets
//	                             [from, to) that Repair removed or found missing
//
// A segment file starts with a 32-byte header:
//
//	0  magic        [4]byte "FMQS"
//	4  version      uint16  format version, 1; any other value gives *VersionError
//	6  flags        uint16  0
//	8  base offset  uint64  offset of the first record; equals the file name
//	16 created      int64   creation time, Unix nanoseconds
//	24 reserved     uint32  0
//	28 header CRC   uint32  CRC of bytes 0..27
//
// followed by batches, back to back. While fsyncs carry little data, the
// writer keeps zero-filled space ahead of the data (so that fdatasync
// overwrites existing blocks instead of growing the file, which saves a
// journal commit per fsync): the data ends at the end of the file or at the first
// batch header whose length is zero, after which the file holds only zeros.
// A segment is cut to its data when the next one starts and on Close. A batch
// is a 48-byte header and a payload:
//
//	0  length       uint32  length of the whole batch, header included
//	4  CRC          uint32  CRC of bytes 8..length-1: the rest of the header and
//	                        the payload exactly as stored (compressed)
//	8  version      uint8   batch format version, 1
//	9  codec        uint8   0 none, 1 s2 (block format), 2 zstd (one frame that
//	                        declares its content size)
//	10 flags        uint16  0
//	12 count        uint32  number of records, at least 1
//	16 base offset  uint64  offset of the first record; the next batch starts
//	                        at base offset + count
//	24 first time   int64   smallest record time in the batch, Unix nanoseconds
//	32 last time    int64   largest record time in the batch, Unix nanoseconds
//	40 raw length   uint32  length of the decompressed payload
//	44 reserved     uint32  0
//	48 payload      the records, compressed with the codec
//
// The decompressed payload is count records back to back, each:
//
//	uvarint  body length (bytes that follow, up to the next record)
//	[16]byte id (a UUID)
//	uvarint  time - first time of the batch, nanoseconds
//	uvarint  number of headers, then for each: uvarint key length, key,
//	         uvarint value length, value
//	         the value: the rest of the body
//
// Offsets are dense: record n of a batch has offset base+n, and batches
// follow each other without holes inside a segment. A segment's records end
// where the next segment's begin, except across a gap that Repair recorded
// with a gap marker.
//
// # Limits
//
// A record body is at most [Config.MaxRecordBytes] (default 4 MiB) and a
// decompressed payload at most [Config.MaxBatchBytes] (default 8 MiB);
// decoders reject larger declared sizes before allocating, and decompress into
// a buffer of exactly the declared raw length.
//
// # Writing and durability
//
// One goroutine owns the write path: it takes every queued Append, encodes
// them into one batch (split only at MaxBatchBytes), compresses it and writes
// it with one pwrite; a second goroutine fsyncs (fdatasync) and then
// acknowledges, so that the next group is written while the last one is
// being synced. [SyncEach] fsyncs every group before acknowledging it (so
// concurrent appenders share fsyncs); [SyncGroup] waits until
// [Config.GroupRecords] records are written or [Config.GroupInterval] has
// passed since the first unsynced one (with a negative GroupInterval it
// waits for nothing: each fsync takes what was written during the previous
// one; [Config.MinSyncInterval] paces the fsyncs on top of either);
// [SyncNone] acknowledges once written to the OS (it survives the process,
// not the machine). [Log.AppendAsync] lets one goroutine keep
// several appends in flight. New segments are created as a temporary file
// (header and zeros), fsynced and renamed into place.
//
// The write path, with the goroutine that runs each step and its file:
//
//	Append, AppendAsync, Sync     any goroutine (write.go)
//	   |
//	   | reqCh: queued appends
//	   v
//	writer                        write.go: assigns offsets, encodes and
//	   |   <--> preallocator      compresses a group, one pwrite, rolls
//	   |        (prealloc.go)     segments; zero-fills a small step ahead
//	   | sync queue: written groups; the writer does not wait for an fsync
//	   v
//	syncer                        commit.go: group commit, fdatasync per policy
//	   |
//	   +--> publish               the batches enter the index; readers wake
//	   +--> acknowledge           Ack.Done closes; Append returns
//
// Beside it, the retainer (retention.go) deletes old segments every
// [Config.RetentionInterval] and after each roll; recovery (recover.go) runs
// in Open before any goroutine starts; a read-only Log runs only a goroutine
// that watches the directory (sys_linux.go) and keeps its index current
// through readonly.go.
//
// The invariants the write path keeps:
//
//   - A record is visible to readers of the writing Log only once it is
//     acknowledged: the syncer publishes a group after its fsync and just
//     before it acknowledges it. (A read-only Log reads the files, so it may
//     see records written but not yet acknowledged; see Readers.) There
//     are two exceptions. Under [Config.VisibleBeforeSync] the writer
//     publishes each group right after its pwrite, and the syncer only
//     acknowledges it. And a Reader that asked for it ([Reader.ReadWritten])
//     reads the groups the writer noted after their pwrite (written.go),
//     up to [Log.WrittenOffset], while every other reader still waits for
//     the publish; a failure drops the noted groups, and a group written
//     after one is never noted. The recovery checkpoint and the
//     deduplication state it covers follow the acknowledged end, never the
//     published or written one.
//   - Nothing is acknowledged as durable after a failed write or fsync: the
//     first failure is kept, every group an fsync was still to cover fails
//     with it, and every later Append fails until the Log is reopened and
//     recovers (a group written before the failure was known was never
//     synced). Under SyncNone a group the OS took before the failure is still
//     acknowledged: that is all SyncNone promises.
//   - A full disk refuses appends; it never breaks the Log. Before the
//     writer decides anything about a group of appends, it reserves the
//     space the group can take (fallocate with KEEP_SIZE ahead of the data
//     in the active segment, and spare segment files for the rolls the
//     group may cause; see reserve.go). A disk without that room fails the
//     group's appends with [ErrNoSpace] before any byte of them is
//     written, the Log keeps serving reads, and appends succeed again once
//     space returns, without a reopen. Writes land in reserved blocks and
//     cannot meet ENOSPC. Reserved blocks past the data are released when
//     the segment is cut (at a roll and at Close). Where fallocate is not
//     supported nothing is reserved, and a write that meets a full disk
//     fails the Log as any failed write does.
//   - Offsets are dense and assigned in order by the one writer: the records
//     of one Append are contiguous, and the offset it returns is the one its
//     first record is stored at.
//   - The writer starts a segment only after the one before it is complete:
//     cut to its data and fsynced. Only the last segment can have a torn tail.
//   - The directory is fsynced after every create, rename and delete, and no
//     file is removed before its replacement is in place (a torn tail is
//     copied to quarantine/ and that copy made durable before the segment is
//     truncated).
//   - Close writes and syncs (per policy) every Append queued before it and,
//     unless a write failed, cuts the active segment to its data and fsyncs it.
//
// # Copies
//
// [Log.AppendBatches] stores batches as another Log's [Log.ReadRaw] returned
// them, byte for byte: a copy of a stream that pulls with the consumers'
// fetch path holds the same batches (still compressed, with their ids and
// times) at the same offsets. Each batch is checked whole (header, CRC,
// decompression, record framing) before anything is stored, and must
// start at the copy's next offset ([ErrOffsetMismatch] otherwise), so a
// copy never stores damaged bytes, a gap or an overlap. Copied records
// are not checked for duplicates: the log they come from did.
//
// # Idempotent appends
//
// Two headers make an append idempotent, both decided by the one writer
// goroutine (so two concurrent appends of the same record never both
// land) and both holding across Close, a crash and Open:
//
//   - [HeaderMsgID] (fastmq-msg-id, made by [MsgID]): a record whose id
//     was appended within [Config.DedupWindow] (default 2 minutes, as
//     JetStream's Nats-Msg-Id window) is a duplicate. The window is counted
//     from the earlier record's time. At most [Config.MaxDedupIDs] ids are
//     remembered (default 1 Mi); beyond that the oldest are forgotten early.
//   - [HeaderProducer] (fastmq-producer: "<producer>:<sequence>", made by
//     [ProducerSeq]), exact and without a window, as Kafka's idempotent
//     producer: the Log keeps each producer's last sequence. Its first
//     record has sequence 1; a record at or below the last sequence is a
//     duplicate; one above last+1 fails the whole call with a
//     [*SequenceError] (a gap), and so does a first record other than 1.
//     At most [Config.MaxProducers] producers are kept (default 1024): a
//     new one beyond makes the one whose last record is oldest forgotten
//     (logged), and that producer's next record fails as from an unknown
//     producer (never taken in silence): it starts again under a new id.
//     A producer that cannot keep its sequence across its own restarts
//     takes a new id at every start. A record with both headers is decided
//     by its sequence alone (its id still names the original's offset).
//
// A duplicate is not appended. When every record of a call is one, the
// call appends nothing and returns the offset of the record the first one
// repeats with a [*DuplicateError] (matching [ErrDuplicate]); its offset
// is unknown only for a producer's sequence below its last one without a
// message id in the window. In a call that mixes duplicates and new
// records the new ones are appended, contiguous and in order, and
// [Ack.Duplicates] lists the others. A duplicate is answered only after
// the record it repeats is acknowledged. Records without these headers
// cost one length check each.
//
// The state of the acknowledged records is kept in dedup.json, a small
// state file (see Consumer offsets for the envelope), format version 1,
// written by the checkpointer just before each meta.json checkpoint that
// follows a change, so that it covers every record below the checkpoint:
//
//	{"version":1,"data":{"through":<offset>,"id_time":<ns>,"producers":[{"id":"<producer>","seq":<seq>,"offset":<offset>,"time":<ns>}, ...]}}
//
// through: the file reflects every record below it; id_time: the time of
// the newest record with a message id below it; producers: each producer's
// last sequence, the offset and time of that record. Open loads it, drops
// marks of records recovery found missing, and scans the records from the
// checkpoint to the end (and the message ids of the window, when id_time
// says ids were used within it). A file that does not decode is moved to
// quarantine/ (logged at Error) and the state rebuilt from the whole log.
//
// # Retention
//
// Retention deletes whole segments, oldest first, never the one being
// written: by age (the newest record time in the segment is older than
// [Config.RetentionAge]) or by size (the log is larger than
// [Config.RetentionBytes]). With a floor set by [Log.SetFloor], a segment is
// deleted only if all its offsets are below the floor. With
// [Config.RetentionFloor] (interest retention: a node passes the least
// floor of the stream's consumer groups), a segment whose records are all
// below the owner's floor is deleted at the next pass whatever its age, and
// the others are kept until the age or size limit, then the cap, deletes
// them anyway: logged, and counted by [Log.RetentionForced]. Reading below
// [Log.OldestOffset] gives an [*OutOfRangeError] carrying the oldest offset.
//
// # Recovery
//
// On [Open], every batch
// of the last segment is checked (length, CRC, offsets); earlier segments are
// checked structurally (lengths, offsets) and fully by [Verify]. An invalid
// suffix of the last segment that no valid batch follows is a torn tail: it is
// copied to quarantine/, the segment is truncated to the last whole batch and
// a warning is logged. Open never needs free space: when the disk has no
// room for the copy, the tail is kept in memory (up to 64 MiB), the segment
// cut all the same and the log served; the copy is written once space
// returns (every Config.RetentionInterval, and at Close), and its loss, if
// the process ends first, is logged at Error. A torn tail holds no
// acknowledged record. Any other damage makes Open fail with a *CorruptError
// naming the segment, the byte position and the offset; nothing is skipped in
// silence. Readers verify each batch's checksum on every read, so damage in
// older segments is reported (with segment and offset) when it is read, and
// [Verify] finds it all at once. [Repair] keeps each damaged segment's valid
// prefix, moves the original to quarantine/ and reports the offsets removed;
// offsets missing between segments (a segment deleted or cut short) it
// records as a gap, so that Open accepts the directory afterwards. Zeros
// that end a segment other than the last, where records belong, are damage:
// the writer cuts a segment to its data before it starts the next.
//
// Preallocated zeros make a zero-filled tail (a disk that lost its last
// blocks) look like the clean end of the data, so the end alone cannot tell
// whether acknowledged records are missing; the recovery checkpoint in
// meta.json can. When Open finds the data ending below the checkpoint, the
// acknowledged records [end, checkpoint) are lost: it logs that at Error with
// the range, reports it in [Log.Recovery] and starts a new epoch; [Verify]
// reports it as damage; [Repair] records it (a new epoch, the checkpoint
// lowered to the data) and reports it in [RepairReport.Lost].
//
// # Identity and epochs
//
// meta.json is a small state file (see Consumer offsets for the envelope),
// format version 1, replaced atomically (temporary file, fsync, rename, fsync
// of the directory):
//
//	{"version":1,"data":{"id":"<uuid>","epochs":[{"epoch":0,"start":0}, ...],"acked":<offset>,"open":<bool>}}
//
// id is the log's identity ([Log.ID]): 16 random bytes, created with the log
// and never changed. A directory from before meta.json gets one on its first
// writer Open (a read-only Log of such a directory reports the zero id). Two
// logs never share an id, so a consumer that keeps (id, epoch, offset) never
// continues one log's offsets on another log, even one with the same name.
//
// epochs is the epoch history, as Kafka's leader-epoch checkpoint (KIP-320):
// each entry says that epoch starts at offset start, in increasing order of
// both. Epoch 0 starts at the log's first offset. Offsets are dense and are
// never reused within an epoch, but an offset can be handed out again after
// the log lost its tail; a new epoch begins whenever the log may have lost
// records that it, or a read-only reader of its files, could have handed out:
// recovery cut a torn or damaged tail, the data ends below the checkpoint,
// the last writer did not close cleanly (open is still true: records it
// acknowledged after its last checkpoint may be gone without a trace), or
// Repair removed anything. The new epoch starts at the log's next offset
// after the cut, and entries that start at or after it are dropped first (the
// records they named are gone). So (epoch, offset) never names two different
// records. The epoch of the record at offset o is the last entry with start
// <= o ([Log.EpochOf]); an epoch e ends ([Log.EpochEnd]) where the first
// later entry starts (at [Log.NextOffset] for the current epoch). A consumer
// keeps (id, epoch, next), epoch being that of the last record it consumed
// (0 before any). If its epoch e ended at x < next, the records it read at
// x..next-1 are gone and those offsets name other records (or none yet): it
// continues at x, still in epoch e, and reports the range [x, next) as lost.
// If the log does not know e (EpochEnd reports false) or has another id, the
// position belongs to another log and is never continued.
//
// acked is the recovery checkpoint: every offset below it was acknowledged
// (and so published to readers of the writer; under
// [Config.VisibleBeforeSync] readers may have seen more). The writer raises it on Close and in
// the background at most once a second after appends (never on the Append
// path); Open and Repair lower it to the data after recording a loss. It is
// at most a second or so behind, so it detects the loss of all but the newest
// acknowledged records. Under SyncNone, records are acknowledged before they
// are durable, and a machine crash that loses them is reported as such a loss.
// Under [Config.VisibleBeforeSync], readers may have seen records above the
// checkpoint that were never durable; a machine crash that loses them leaves
// open true, so Open starts a new epoch at the surviving end and the
// consumers that read them learn of the loss.
//
// open is true from Open to a clean Close (after its last fsync and
// checkpoint); a writer that crashed or failed a write leaves it true.
//
// Open writes meta.json (a new identity, a new epoch, a lowered
// checkpoint, open set) durably before the writer hands out its first
// offset. A meta.json that does not decode makes Open, OpenReadOnly and
// Verify report it (an error matching [ErrCorrupt] naming the file); it is
// never silently replaced: [Repair] moves it to quarantine/ and gives the log
// a new identity, so that consumers start over as on a new log instead of
// continuing offsets they cannot check. A file of a later version is refused
// with an error matching [ErrUnsupportedVersion].
//
// # Readers
//
// A read-only Log ([OpenReadOnly]) takes no lock and sees batches as the writer
// writes them (inotify wakes waiting readers; nothing polls). It may see
// records that a SyncGroup or SyncEach writer has written but not yet
// acknowledged. Decoding is bounded: a batch declares its decompressed size,
// which is checked against the limit before anything is allocated. Where its
// valid data ends, a read-only Log tells the end from damage as recovery
// does: invalid bytes at the end of the last segment that no valid batch
// follows are the end (a torn tail, or a batch still being written), and
// anything else is damage, which reads from there return as a *CorruptError
// ([Log.Damage]) instead of a clean end.
//
// # Consumer offsets
//
// An [OffsetStore] keeps one file, offsets.json, in its own directory, beside
// offsets.lock (flock(2)-ed by the one store; holds its pid). The file is a
// JSON object, format version 2:
//
//	{"version":2,"data":{"<source>":{"<stream>":{"next":<next>,"id":"<uuid>","epoch":<epoch>}, ...}, ...}}
//
// version is the format version. data maps each source (a publisher) and
// stream to a [Position]: next, the next offset to read (a logical record
// number, never a byte position), and the identity and epoch of the log it
// was read from (see Identity and epochs; the zero id when unknown). Version
// 1 held next alone ({"<stream>":<next>}) and a file from before versioning
// (version 0) is version 1's data object alone; both are still read, as
// positions with the zero id and epoch 0. A file of a later version is refused with
// an error matching [ErrUnsupportedVersion], and one that does not decode
// with one matching [ErrCorrupt]. Every Commit replaces the whole file: it
// writes a temporary file (offsets.json.tmp-<random>), fsyncs it, renames it
// over offsets.json and fsyncs the directory, so after a crash the file holds
// the old or the new offsets, never a mix; a temporary file left by a crash is
// removed on open. When a Commit fails the store keeps what the file says.
package spool
