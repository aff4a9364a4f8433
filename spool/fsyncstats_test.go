package spool

import (
	"context"
	"testing"
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
