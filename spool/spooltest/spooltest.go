package spooltest

import (
	"context"
	"testing"
	"time"

	"github.com/fastmq/fastmq/spool"
)

// CheckSyncPacing appends 400 one-byte records to l, four in flight at a
// time, and fails t unless l's group fsyncs started at least interval
// apart: their count (spool.Log.FsyncStats) is at most the time the
// appends took over interval, plus two. Back to back, a disk's fsyncs of
// a few appends each are several times as many; a disk slower than
// interval passes either way.
func CheckSyncPacing(t testing.TB, l *spool.Log, interval time.Duration) {
	t.Helper()
	ctx := context.Background()
	const n, window = 400, 4
	before := l.FsyncStats().Count
	start := time.Now()
	acks := make([]*spool.Ack, 0, window)
	for i := 0; i < n; i++ {
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
	count := l.FsyncStats().Count - before
	if limit := uint64(took/interval) + 2; count > limit {
		t.Fatalf("%d fsyncs in %v: more than one per %v (%d)", count, took, interval, limit)
	}
	if count < 2 {
		t.Fatalf("%d fsyncs for %d appends with %d in flight", count, n, window)
	}
}
