package spool

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test with errors.Is.
var (
	// ErrClosed is returned by every method of a closed Log, Reader or OffsetStore.
	ErrClosed = errors.New("spool: closed")
	// ErrReadOnly is returned by Append and Sync on a Log opened with OpenReadOnly.
	ErrReadOnly = errors.New("spool: read-only")
	// ErrLocked is returned by Open when another writer holds the directory lock.
	ErrLocked = errors.New("spool: locked by another writer")
	// ErrOutOfRange matches *OutOfRangeError: the offset is below the oldest retained one.
	ErrOutOfRange = errors.New("spool: offset out of range")
	// ErrCorrupt matches *CorruptError and *VersionError.
	ErrCorrupt = errors.New("spool: corrupt data")
	// ErrTooLarge is returned when a record or batch exceeds the configured limits.
	ErrTooLarge = errors.New("spool: too large")
	// ErrInvalidRecord is returned by Append for a record it cannot store,
	// such as one with a time before 1970 or after 2116.
	ErrInvalidRecord = errors.New("spool: invalid record")
	// ErrNotSpool is returned by OpenReadOnly, Verify and Repair for a
	// directory that holds no spool: no segment file, no LOCK file.
	ErrNotSpool = errors.New("spool: not a spool directory")
	// ErrUnsupportedVersion matches *VersionError, and the error OpenOffsets
	// returns for an offsets file written in a newer format version.
	ErrUnsupportedVersion = errors.New("spool: unsupported format version")
	// ErrNoSpace is returned by Append when the disk has no room for the
	// records: the append is refused before anything of it is written,
	// and the Log stays usable (appends succeed again once space returns).
	// The error also matches the system's ENOSPC or EDQUOT.
	ErrNoSpace = errors.New("spool: no space left on device")
)

// OutOfRangeError reports a read below the oldest retained offset.
type OutOfRangeError struct {
	Requested uint64 // the offset asked for
	Oldest    uint64 // the oldest offset still retained
}

// Error describes the requested and the oldest offset.
func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("spool: offset %d out of range: oldest retained offset is %d", e.Requested, e.Oldest)
}

// Is makes errors.Is(err, ErrOutOfRange) true.
func (e *OutOfRangeError) Is(target error) bool { return target == ErrOutOfRange }

// CorruptError reports damaged data: which segment, where in it, and the
// offset of the first record that could not be read.
type CorruptError struct {
	Segment string // segment file name (base name), empty for data not read from a file
	Pos     int64  // byte position of the damaged batch (or header) in the segment or buffer
	Offset  uint64 // offset of the first record affected
	Reason  string
}

// Error names the segment, byte position and offset.
func (e *CorruptError) Error() string {
	if e.Segment == "" {
		return fmt.Sprintf("spool: corrupt data at byte %d (offset %d): %s", e.Pos, e.Offset, e.Reason)
	}
	return fmt.Sprintf("spool: corrupt segment %s at byte %d (offset %d): %s", e.Segment, e.Pos, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// VersionError reports a segment or batch written in a format version this
// package cannot read.
type VersionError struct {
	Segment string
	Version int
}

// Error names the segment and the version found.
func (e *VersionError) Error() string {
	return fmt.Sprintf("spool: segment %s has unsupported format version %d", e.Segment, e.Version)
}

// Is makes errors.Is true for ErrUnsupportedVersion and ErrCorrupt.
func (e *VersionError) Is(target error) bool {
	return target == ErrUnsupportedVersion || target == ErrCorrupt
}
