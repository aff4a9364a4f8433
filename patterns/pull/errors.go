package pull

import (
	"errors"
	"fmt"
	"strings"
)

// Causes of a *FetchError. Test with errors.Is.
var (
	// ErrDamaged says the publisher's stored data at the fetch position is
	// damaged: the publisher reported it (StatusDamaged), or the fetched
	// batches kept failing their checks. The records are not skipped; the
	// publisher's spool needs a repair (which turns the damaged batches
	// into a gap that consumers then cross).
	ErrDamaged = errors.New("pull: damaged data on the publisher")
	// ErrOutOfRange says the position fell outside the publisher's log
	// under the StopPublisher policy.
	ErrOutOfRange = errors.New("pull: offset out of range")
	// ErrProtocol says the publisher's replies kept breaking the pull
	// protocol (records that do not match the reply header, refused
	// requests).
	ErrProtocol = errors.New("pull: protocol error")
	// ErrForbidden says the publisher's ACL does not let this consumer
	// read the stream (StatusForbidden): it is not asked again.
	ErrForbidden = errors.New("pull: forbidden")
)

// FetchError reports a publisher whose fetcher stopped for good. Next
// returns it once, after the records fetched from that publisher before it
// stopped; Err returns the first one. Every record of the publisher below
// Offset was delivered; nothing at or above it was.
type FetchError struct {
	Publisher string
	Stream    string
	Offset    uint64 // the next offset the fetcher would have fetched
	Err       error  // the cause; errors.Is matches ErrDamaged, ErrOutOfRange, ErrProtocol, ErrForbidden
}

// Error names the publisher, stream and offset, then the cause.
func (e *FetchError) Error() string {
	return fmt.Sprintf("pull: stopped pulling %s from %s at offset %d: %s",
		e.Stream, e.Publisher, e.Offset, strings.TrimPrefix(e.Err.Error(), "pull: "))
}

// Unwrap returns the cause.
func (e *FetchError) Unwrap() error { return e.Err }
