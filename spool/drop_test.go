package spool

import (
	"context"
	"testing"
)

// TestDropOldestSegment drops whole segments, oldest first, ignoring the
// floor, and never the one being written.
func TestDropOldestSegment(t *testing.T) {
	l, err := Open(Config{Dir: t.TempDir(), SegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < 40; i++ {
		if _, err := l.Append(context.Background(), Record{Value: make([]byte, 500)}); err != nil {
			t.Fatal(err)
		}
	}
	l.SetFloor(0)
	before, segs := l.Bytes(), l.Stats().Segments
	if segs < 3 || before != l.Stats().Bytes {
		t.Fatalf("%d segments, %d bytes (stats %d)", segs, before, l.Stats().Bytes)
	}
	oldest := l.OldestOffset()
	name, size, err := l.DropOldestSegment()
	if err != nil || name == "" || size <= 0 || l.Bytes() != before-size || l.OldestOffset() <= oldest {
		t.Fatalf("drop: %q %d %v; bytes %d of %d, oldest %d (was %d)", name, size, err, l.Bytes(), before, l.OldestOffset(), oldest)
	}
	for {
		name, _, err := l.DropOldestSegment()
		if err != nil {
			t.Fatal(err)
		}
		if name == "" {
			break
		}
	}
	if st := l.Stats(); st.Segments != 1 || st.Next != 40 {
		t.Fatalf("after dropping all it could: %+v", st)
	}
}
