// Package ship is the shipper half of log shipping: it follows files like
// `tail -F` (through rotation and truncation, with internal/tail) and
// appends each line as a record to a local spool, from which collectors
// (package collect) pull. A line is shipped exactly once across restarts
// and crashes, with the limits stated under "Crash window".
//
// # Header convention
//
// Every shipped record's value is one line, without its newline. Its
// headers:
//
//   - "source" (HeaderSource): the followed path the line came from, as
//     configured. Every record carries it, first.
//   - "pos" (HeaderPosition): on the last line of each file in every batch
//     only, the position just after that line, as the decimal text
//     "DEV:INO:OFFSET" (device and inode of the file that was at the path,
//     and the byte offset). It follows "source".
//
// Readers of the stream may ignore "pos"; the shipper itself reads it back
// on start (see below).
//
// # Exactly once
//
// Each batch the tailer delivers is appended to the spool, the spool is
// synced (whatever its sync policy), and only then are the tailer's read
// positions committed to Config.StateFile. Positions are committed for the
// batches handled before the current one, so the state file lags the spool
// by at most one batch; on a clean stop (Run's context ends, or Close) the
// last batch's positions are committed too.
//
// On start, Run reads the "pos" headers of the newest records of the
// spool (the last 8192 records, more than one batch) and learns, per path
// and file, the position after the last line shipped. Lines the tailer
// delivers again at or before that position are skipped: they were
// appended before the crash, but their positions had not been committed.
//
// # Crash window
//
// After kill -9 (or power loss), at any instant:
//
//   - Nothing is lost that the spool made durable, and no line is skipped:
//     positions are committed only after the lines they cover are synced in
//     the spool, so a restart reads again from at or before the first line
//     the spool does not hold.
//   - The one batch that can be appended to the spool but not yet committed
//     in the state file is not appended twice: its last line per file
//     carries "pos", which the restart reads back. If the spool had not
//     synced that batch, it is gone from the spool and the tailer delivers
//     it again, so it arrives once.
//   - Lines can be duplicated only when the read-back misses a batch: when
//     other writers appended more than 8192 records to the same stream
//     after the shipper's last batch (keep a shipper's stream its own). At
//     most the lines between the committed position and the last appended
//     batch are repeated. When the state file is missing or damaged (moved
//     aside to .corrupt), Run reads the whole retained spool back instead
//     of its newest records, so a file idle for longer than the window is
//     not shipped again from its start.
//   - A file truncated or rewritten in place (copytruncate) while the
//     shipper is down, and grown past its old size again, keeps its device
//     and inode: its lines up to the old shipped offset are taken for
//     shipped and skipped. Rotation by rename or by a new file is not
//     affected.
//
// Config.StateFile may be empty: the shipper then reads every file from
// its beginning (or end, with StartAtEnd) on each start and relies on the
// read-back alone, of the whole retained spool.
package ship
