package spool

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestInterestRetention: with a RetentionFloor, segments below it go at
// the next pass whatever their age, those at or above it stay, and the age
// cap still removes old ones the owner wants, counted as forced.
func TestInterestRetention(t *testing.T) {
	ctx := context.Background()
	var floor atomic.Uint64
	var known atomic.Bool
	l := openT(t, Config{Dir: t.TempDir(), Sync: SyncNone, SegmentBytes: 2 << 10, RetentionInterval: time.Hour,
		RetentionAge: time.Hour, RetentionFloor: func() (uint64, bool) { return floor.Load(), known.Load() }})
	fill := func(n int, at time.Time) {
		for i := 0; i < n; i++ {
			if _, err := l.Append(ctx, Record{Time: at, Value: make([]byte, 200)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	fill(60, time.Now())
	apply := func() {
		t.Helper()
		if _, err := l.ApplyRetention(); err != nil {
			t.Fatal(err)
		}
	}
	// No one known to want anything: age and size alone decide (nothing is old).
	apply()
	if l.OldestOffset() != 0 {
		t.Fatalf("oldest %d with no interest known", l.OldestOffset())
	}
	// Group A acknowledged everything, B nothing: the floor is B's, 0.
	known.Store(true)
	apply()
	if l.OldestOffset() != 0 {
		t.Fatalf("records not acknowledged by every group removed: oldest %d", l.OldestOffset())
	}
	// B acknowledges up to 30: the segments below go, none at or above.
	floor.Store(30)
	apply()
	if old := l.OldestOffset(); old == 0 || old > 30 {
		t.Fatalf("after acks up to 30: oldest %d", old)
	}
	if l.RetentionForced() != 0 {
		t.Fatalf("forced %d with nothing past the caps", l.RetentionForced())
	}
	if got, want := l.BytesFrom(l.OldestOffset()), l.Stats().Bytes-segHeaderLen*int64(l.Stats().Segments); got != want {
		t.Fatalf("BytesFrom(oldest) %d, want the batches' bytes %d", got, want)
	}
	if l.BytesFrom(l.NextOffset()) != 0 {
		t.Fatal("BytesFrom(next) not 0")
	}
	// Old records the group has not acknowledged: the age cap removes
	// them anyway, and says so.
	l2 := openT(t, Config{Dir: t.TempDir(), Sync: SyncNone, SegmentBytes: 2 << 10, RetentionInterval: time.Hour,
		RetentionAge: time.Hour, RetentionFloor: func() (uint64, bool) { return 10, true }})
	for i := 0; i < 80; i++ {
		at := time.Now()
		if i < 60 {
			at = at.Add(-2 * time.Hour)
		}
		if _, err := l2.Append(ctx, Record{Time: at, Value: make([]byte, 200)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l2.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	old := l2.OldestOffset()
	if old <= 10 || old > 60 {
		t.Fatalf("age cap: oldest %d", old)
	}
	if f := l2.RetentionForced(); f != old-10 {
		t.Fatalf("forced %d, want the %d records from the floor 10 to the oldest %d", f, old-10, old)
	}
}
