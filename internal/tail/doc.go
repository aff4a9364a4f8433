// Package tail follows files like `tail -F` and keeps its own read
// positions, for a log shipper that must neither skip nor repeat lines
// across restarts.
//
// # Reading
//
// A Tailer follows a fixed list of paths. Tailer.Run reads whatever is
// available, splits it into lines and hands them to a callback in batches
// (at most Config.MaxBatchLines lines or about Config.MaxBatchBytes bytes).
// Files are read with large positioned reads, never one system call per
// line. When nothing is available, each path is checked every
// Config.PollInterval (250ms by default) with one fstat of the open file and
// one stat of the path (plus a 256-byte read of its head when it grew);
// Close and context cancellation wake Run at once.
//
// A line ends at "\n"; the "\n" and a "\r" before it are removed. A last line
// without "\n" is held until it is completed, or, for a file that was rotated
// away, until the file is finished (see Rotation), when it is delivered as
// is. A line longer than Config.MaxLineBytes is delivered in pieces of that
// size, each but the last marked Line.Split, so memory stays bounded.
//
// # Positions
//
// Every Line carries the Position just after it: the configured path, the
// device and inode of the file it came from, and the byte offset. When the
// callback returns nil, the batch is handled and the in-memory positions
// advance (Tailer.Positions). Tailer.Commit writes them to Config.StateFile
// crash-safely; call it after the sink is durable. Lines handled but not
// committed are delivered again after a crash (at-least-once); committed
// lines are not delivered again, unless their file is truncated or rewritten
// in place (see Rotation).
//
// # Rotation
//
// When the path names a different inode than the open file (rename
// rotation), or no longer exists (deletion), the open file is kept open and
// read to its end before the new file is read from offset 0. It then stays
// open for Config.RotateGrace (5s by default) after it last grew, so that
// lines its writer appends before reopening are still read; they are
// delivered before the new file's lines of the same poll. When the grace
// ends, its last unterminated line, if any, is delivered (so it can come
// after lines of the new file) and it is closed. At most 8 rotated files
// per path are kept open; beyond that the oldest are closed as soon as they
// reach their end.
//
// When the open file becomes shorter than the read offset (copytruncate),
// reading restarts at offset 0 and a warning is logged. When a file idle at
// its end grows again, its first (up to 256) bytes are compared with those
// seen before, so a truncation followed by more writes than the old offset
// before the next poll is also noticed and read from 0. As with any
// tail -F, lines written between the last read and a copytruncate are lost.
//
// A path that does not exist yet is opened, from its beginning, when it
// appears.
//
// # Restart
//
// On New, each path's saved files are matched as follows:
//
//   - If the file at the path has the saved device and inode and starts with
//     the saved fingerprint (CRC32C of its first up to 256 bytes), reading
//     resumes at the saved offset. If it is now shorter than the offset, it
//     was truncated while stopped: reading restarts at 0 with a warning. If
//     the fingerprint differs, the inode number was reused by a new file:
//     it is read from 0.
//   - A saved file that is no longer at the path (rotated while stopped) is
//     looked for among the regular files of the same directory named
//     path.* or path-* (app.log.1, app.log-20240101). If found with a
//     matching fingerprint, it is drained from the saved offset first, then
//     treated like any rotated file. If not found (deleted, compressed), a
//     warning is logged: its unread lines are lost.
//   - A file at the path that matches no saved file is new and is read from
//     0. Files rotated more than once while stopped are not searched for
//     beyond the saved ones: intermediate generations are skipped.
//   - A path with no saved state starts at the beginning of its file, or,
//     with Config.StartAtEnd, at the start of its last, incomplete line (at
//     its end if it ends with a newline).
//
// # State file
//
// The state file is a header line followed by a JSON body:
//
//	fastmq-tail-state 1 <body length> <CRC32C of body, 8 hex digits>\n
//	{"paths":[{"path":"app.log","files":[{"dev":2049,"ino":131,"offset":4096,"fp_len":256,"fp_crc":305419896}]}]}\n
//
// Files of a path are listed oldest first; the last one is the file at the
// path. A path with no files was followed while it did not exist. It is
// replaced by writing a temporary file, fsync, rename and fsync of the
// directory. A state file that fails to decode (bad header, length,
// checksum, JSON or limits) or has another version yields a *StateError.
// By default New then moves it to StateFile+".corrupt", logs an error and
// starts as if there were no saved positions (so Config.StartAtEnd decides
// between re-reading and skipping); Tailer.LoadError reports it. With
// Config.StrictState, New returns the error instead.
//
// Only one Tailer may use a state file at a time.
//
// # Files
//
// The code follows these sections: tail.go holds the Tailer, its Config,
// Run's loop, Commit and Close; poll.go the reading of each path and the
// rotation handling (Reading, Rotation); restart.go the restoring of saved
// positions (Restart); state.go the state file codec (State file);
// reader.go the per-file reader and its line splitting.
package tail
