package fastmq_test

import (
	"context"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/spool"
)

// TestStreamSyncPacing: a node's streams pace their fdatasyncs at
// StreamSyncInterval by default: however fast the appends come, the
// fsyncs started at least that far apart, so their count is bounded by
// the time the appends took (back to back, this disk's fsyncs of a few
// appends each are several times as many).
func TestStreamSyncPacing(t *testing.T) {
	n := newNode(t, "paced")
	l, err := n.Stream("s")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const count, window = 400, 4
	start := time.Now()
	acks := make([]*spool.Ack, 0, window)
	for i := 0; i < count; i++ {
		if len(acks) == window {
			if _, err := acks[0].Wait(ctx); err != nil {
				t.Fatal(err)
			}
			acks = acks[1:]
		}
		a, err := l.AppendAsync(ctx, spool.Record{Value: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, a)
	}
	for _, a := range acks {
		if _, err := a.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	st := l.FsyncStats()
	if limit := uint64(took/fastmq.StreamSyncInterval) + 2; st.Count > limit {
		t.Fatalf("%d fsyncs in %v: more than one per %v (%d)", st.Count, took, fastmq.StreamSyncInterval, limit)
	}
	if st.Count < 2 {
		t.Fatalf("%d fsyncs for %d appends with %d in flight", st.Count, count, window)
	}
}
