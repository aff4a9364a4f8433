package spool

import (
	"context"
	"testing"
	"time"
)

// TestFsyncStats: each synced Append is one observed fsync.
func TestFsyncStats(t *testing.T) {
	l, err := Open(Config{Dir: t.TempDir(), Sync: SyncEach})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < 3; i++ {
		if _, err := l.Append(context.Background(), Record{Value: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	st := l.Stats().Fsyncs
	var n uint64
	for _, c := range st.Counts {
		n += c
	}
	if st.Count < 3 || n != st.Count || st.Sum <= 0 || st.Max <= 0 || st.Max > st.Sum {
		t.Fatalf("fsync stats %+v after three synced appends", st)
	}
}

// TestPreallocZerosPerFsync: while fsyncs are small the writer keeps zeros
// ahead of the data, and no fsync carries more than a small run of them: a
// large run of zeros reaching the disk at once made the group commit's
// fdatasync wait for all of it (a stall of milliseconds at 10 K records/s).
func TestPreallocZerosPerFsync(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir, GroupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	value := make([]byte, 1000)
	const n, window = 2000, 8
	acks := make([]*Ack, 0, window)
	for i := 0; i < n; i++ {
		if len(acks) == window {
			if _, err := acks[0].Wait(ctx); err != nil {
				t.Fatal(err)
			}
			acks = acks[1:]
		}
		a, err := l.AppendAsync(ctx, Record{Value: value})
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
	st := l.FsyncStats()
	if st.Bytes < n*int64(len(value)) {
		t.Fatalf("fsyncs carried %d record bytes, want at least %d", st.Bytes, n*len(value))
	}
	// 2 MB of data in small fsyncs: the zeros ahead of it were written in
	// about as many bytes, a step at a time.
	if st.ZeroBytes < st.Bytes/2 {
		t.Fatalf("%d bytes of zeros preallocated for %d of data: preallocation is off", st.ZeroBytes, st.Bytes)
	}
	if st.MaxZeroBytes > 256<<10 {
		t.Fatalf("one fsync carried %d bytes of zeros: more than 256 KiB", st.MaxZeroBytes)
	}
	l.mu.RLock()
	seg := l.segs[len(l.segs)-1]
	end := seg.size
	l.mu.RUnlock()
	fi, err := seg.f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() <= end {
		t.Fatalf("segment of %d bytes with data to %d: no zeros ahead of the data", fi.Size(), end)
	}
}

// TestEarlySyncInterval: under VisibleBeforeSync, MinSyncInterval 0 means
// EarlySyncInterval, a negative one means none, and a set one stays
// (TestEarlySyncPacing checks the fsyncs of such a Log).
func TestEarlySyncInterval(t *testing.T) {
	for _, c := range []struct {
		early bool
		set   time.Duration
		want  time.Duration
	}{
		{false, 0, 0},
		{true, 0, EarlySyncInterval},
		{true, -1, 0},
		{false, -1, 0},
		{true, 5 * time.Millisecond, 5 * time.Millisecond},
	} {
		cfg, err := Config{Dir: "d", VisibleBeforeSync: c.early, MinSyncInterval: c.set}.normalize()
		if err != nil || cfg.MinSyncInterval != c.want {
			t.Errorf("VisibleBeforeSync %v, MinSyncInterval %v: got %v (%v), want %v", c.early, c.set, cfg.MinSyncInterval, err, c.want)
		}
	}
}
