package group_test

import (
	"context"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/group"
)

// TestBufferedLeasesKept: records wait in a member's buffer for up to
// five AckWaits before Next hands them out. None runs out there (it would
// be dead-lettered: MaxDeliver 1), and a handler that takes a record
// which waited has most of an AckWait to acknowledge it (29/32 of it
// is promised; this one takes 3/4).
func TestBufferedLeasesKept(t *testing.T) {
	const n = 20
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", n)
	ctx := context.Background()
	const ackWait = 800 * time.Millisecond
	m := member(t, group.MemberConfig{AckWait: ackWait, Buffer: 64, MaxDeliver: 1}, p)
	start := time.Now()
	for i := range n {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Delivery != 1 {
			t.Fatalf("offset %d delivered %d times", msg.Offset, msg.Delivery)
		}
		// A slow handler: 50 ms a record, and every fifth 3/4 of an
		// AckWait (pacing, not synchronisation).
		hold := 50 * time.Millisecond
		if i%5 == 4 {
			hold = ackWait * 3 / 4
		}
		time.Sleep(hold)
		if err := msg.Ack(ctx); err != nil {
			t.Fatalf("record %d (offset %d), handed out %v after the fetch and held %v: %v", i, msg.Offset, time.Since(start)-hold, hold, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := time.Since(start); d < 4*ackWait {
		t.Fatalf("the run took %v: records did not wait long in the buffer", d)
	}
	st := p.groups.Stats()["s/g"]
	if st.Expired != 0 || st.Acked != n || st.DeadLettered != 0 {
		t.Fatalf("stats %+v: want %d acked, none expired or dead-lettered", st, n)
	}
}
