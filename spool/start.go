package spool

import (
	"fmt"
	"strconv"
	"time"
)

// StartKind says which of the four start positions a Start is.
type StartKind uint8

// Start kinds.
const (
	StartEarliest StartKind = iota // the oldest retained record
	StartLatest                    // only records appended from now on
	StartOffset                    // a given offset
	StartTime                      // the first record at or after a time
)

// String returns the kind's name: "earliest", "latest", "offset" or
// "time".
func (k StartKind) String() string {
	switch k {
	case StartEarliest:
		return "earliest"
	case StartLatest:
		return "latest"
	case StartOffset:
		return "offset"
	case StartTime:
		return "time"
	}
	return "unknown"
}

// Start is where a reader begins in a log it holds no position in: a pull
// consumer on a publisher without a committed offset, a new consumer
// group's cursor, the target of a group's seek. Offset is used by
// StartOffset, Time by StartTime. The zero value is Earliest. A Start is
// a plain value: safe to copy and to use from many goroutines.
//
// Its text form, read by ParseStart and written by String, is the syntax
// of the command line's --from and --to.
type Start struct {
	Kind   StartKind
	Offset uint64
	Time   time.Time
}

// Earliest starts at the oldest retained record.
func Earliest() Start { return Start{Kind: StartEarliest} }

// Latest starts after the newest record: only records appended later.
func Latest() Start { return Start{Kind: StartLatest} }

// AtOffset starts at offset o (within what the log holds: an offset below
// its oldest record starts at the oldest, one past its end at the end).
func AtOffset(o uint64) Start { return Start{Kind: StartOffset, Offset: o} }

// AtTime starts at the first record at or after t.
func AtTime(t time.Time) Start { return Start{Kind: StartTime, Time: t} }

// ParseStart reads a start position in its text form:
//
//	earliest (or the empty string)  Earliest()
//	latest                          Latest()
//	1200                            AtOffset(1200): a decimal offset
//	2026-01-02T15:04:05Z            AtTime(...): an RFC 3339 time, with
//	                                fractional seconds if wanted
//
// Anything else is an error that names the four forms.
func ParseStart(s string) (Start, error) {
	switch s {
	case "", "earliest":
		return Earliest(), nil
	case "latest":
		return Latest(), nil
	}
	if o, err := strconv.ParseUint(s, 10, 64); err == nil {
		return AtOffset(o), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return AtTime(t), nil
	}
	return Start{}, fmt.Errorf("spool: start %q: want earliest, latest, an offset or an RFC 3339 time", s)
}

// String returns s in the form ParseStart reads: "earliest", "latest", the
// offset in decimal or the time in RFC 3339 (with nanoseconds when it has
// some). A Start of an unknown kind gives "unknown(K)".
func (s Start) String() string {
	switch s.Kind {
	case StartEarliest:
		return "earliest"
	case StartLatest:
		return "latest"
	case StartOffset:
		return strconv.FormatUint(s.Offset, 10)
	case StartTime:
		return s.Time.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("unknown(%d)", s.Kind)
}

// MarshalText returns String's form; a Start of an unknown kind is an
// error.
func (s Start) MarshalText() ([]byte, error) {
	if s.Kind > StartTime {
		return nil, fmt.Errorf("spool: start of unknown kind %d", s.Kind)
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads the form ParseStart reads.
func (s *Start) UnmarshalText(b []byte) error {
	v, err := ParseStart(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
