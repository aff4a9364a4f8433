package group

import (
	"testing"

	"github.com/fastmq/fastmq/patterns/group/internal/wire"
)

// The statuses, refusal codes and start positions of the package's API
// are the wire's.
func TestCodesAreTheWires(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint8
	}{
		{"StatusUnknown", uint8(StatusUnknown), uint8(wire.StatusUnknown)},
		{"StatusBadRequest", uint8(StatusBadRequest), uint8(wire.StatusBadRequest)},
		{"StatusInternal", uint8(StatusInternal), uint8(wire.StatusInternal)},
		{"StatusUnavailable", uint8(StatusUnavailable), uint8(wire.StatusUnavailable)},
		{"StatusForbidden", uint8(StatusForbidden), uint8(wire.StatusForbidden)},
		{"StatusLimitReached", uint8(StatusLimitReached), uint8(wire.StatusLimitReached)},
		{"StatusUnsupported", uint8(StatusUnsupported), uint8(wire.StatusUnsupported)},
		{"RefusedNotLeased", RefusedNotLeased, wire.RefusedNotLeased},
		{"RefusedUnknown", RefusedUnknown, wire.RefusedUnknown},
		{"StartEarliest", StartEarliest, wire.StartEarliest},
		{"StartLatest", StartLatest, wire.StartLatest},
		{"StartOffset", StartOffset, wire.StartOffset},
		{"StartTime", StartTime, wire.StartTime},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, the wire's %d", c.name, c.got, c.want)
		}
	}
}
