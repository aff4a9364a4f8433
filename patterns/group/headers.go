package group

import (
	"slices"
	"strconv"
	"time"

	"github.com/fastmq/fastmq/spool"
)

// HeaderNotBefore holds a record's not-before time, in Unix
// milliseconds (decimal): a group does not lease the record before then.
const HeaderNotBefore = "fastmq-not-before"

// NotBefore returns the header that delays a record's delivery to groups
// until t (delayed delivery); plain consumers are not affected.
func NotBefore(t time.Time) spool.Header {
	// Rounded up, so that a record is never leased before t.
	ms := t.Add(time.Millisecond - 1).UnixMilli()
	return spool.Header{Key: HeaderNotBefore, Value: []byte(strconv.FormatInt(ms, 10))}
}

// delayed reports whether hs hold a not-before time after now.
func delayed(hs []spool.Header, now time.Time) bool {
	if len(hs) == 0 {
		return false
	}
	nb, ok := notBefore(hs)
	return ok && nb.After(now)
}

func notBefore(hs []spool.Header) (time.Time, bool) {
	for _, h := range hs {
		if h.Key == HeaderNotBefore {
			ms, err := strconv.ParseInt(string(h.Value), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			return time.UnixMilli(ms), true
		}
	}
	return time.Time{}, false
}

// HeaderKey holds a record's key: an ordered group never has two records
// of one key in flight at once, and delivers them in offset order.
const HeaderKey = "fastmq-key"

// Key returns the header that gives a record its key.
func Key(k string) spool.Header { return spool.Header{Key: HeaderKey, Value: []byte(k)} }

func keyOf(hs []spool.Header) string {
	for _, h := range hs {
		if h.Key == HeaderKey {
			return string(h.Value)
		}
	}
	return ""
}

// Dead-letter headers: the record's own headers come first.
const (
	HeaderDLQStream     = "fastmq-dlq-stream"
	HeaderDLQOffset     = "fastmq-dlq-offset"
	HeaderDLQGroup      = "fastmq-dlq-group"
	HeaderDLQDeliveries = "fastmq-dlq-deliveries"
	HeaderDLQReason     = "fastmq-dlq-reason"
	// HeaderDLQLastReason is the handler's last reason, a nak's or a
	// term's text (absent when none gave one).
	HeaderDLQLastReason = "fastmq-dlq-last-reason"
	// HeaderDLQHistory is the record's last failed deliveries (up to 8),
	// as JSON: [{"delivery", "member", "leased", "ended", "outcome"
	// (nak, expired, term, member gone, member left), "reason"}...].
	HeaderDLQHistory = "fastmq-dlq-history"
)

// DLQStream returns the dead-letter stream of a group.
func DLQStream(stream, group string) string { return stream + "." + group + ".dlq" }

// withoutHeaders returns a copy of hs without the headers named keys.
func withoutHeaders(hs []spool.Header, keys ...string) []spool.Header {
	out := make([]spool.Header, 0, len(hs)+5)
	for _, h := range hs {
		if !slices.Contains(keys, h.Key) {
			out = append(out, h)
		}
	}
	return out
}
