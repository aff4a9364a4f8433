package group_test

import (
	"context"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/spool"
)

// MemberConfig.Start places a new group's cursor: the first record each
// group gets is the one its start names.
func TestMemberStart(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 10)
	cases := []struct {
		group string
		start spool.Start
		first uint64
	}{
		{"earliest", spool.Earliest(), 0},
		{"offset", spool.AtOffset(6), 6},
		{"past", spool.AtTime(time.Now().Add(-time.Hour)), 0},
		{"latest", spool.Latest(), 10},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range cases {
		m := member(t, group.MemberConfig{Group: tc.group, Start: tc.start}, p)
		if tc.start.Kind == spool.StartLatest {
			// The group exists once the member's first fetch made it:
			// only records appended after it are its own.
			testutil.WaitFor(t, "the group made at the end", 0, func() bool {
				st, ok := p.groups.Stats()["s/"+tc.group]
				return ok && st.Floor == 10
			})
			p.publish(t, "s", 1)
		}
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatalf("%s: %v", tc.group, err)
		}
		if msg.Offset != tc.first {
			t.Errorf("group %s (start %v) got offset %d first, want %d", tc.group, tc.start, msg.Offset, tc.first)
		}
	}
	if _, err := group.NewMember(group.MemberConfig{Stream: "s", Group: "g", Publishers: map[string]string{"p": p.srv.Endpoints()[0]},
		Start: spool.Start{Kind: spool.StartTime + 1}}); err == nil {
		t.Fatal("NewMember took a start of an unknown kind")
	}
}
