package diskguard_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fastmq/fastmq/internal/diskguard"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/spool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// spools opens one spool per name under dir, with 16 KiB segments, and
// returns a Logs func over them.
func spools(t *testing.T, dir string, names ...string) (map[string]*spool.Log, func() map[string]*spool.Log) {
	t.Helper()
	logs := map[string]*spool.Log{}
	for _, name := range names {
		l, err := spool.Open(spool.Config{Dir: filepath.Join(dir, name), SegmentBytes: 16 << 10})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		logs[name] = l
	}
	return logs, func() map[string]*spool.Log { return logs }
}

// appendKB appends count records of 1 KiB to l, in batches of 16.
func appendKB(t *testing.T, l *spool.Log, count int) {
	t.Helper()
	recs := make([]spool.Record, 16)
	for i := range recs {
		recs[i].Value = make([]byte, 1024)
	}
	for ; count > 0; count -= len(recs) {
		if _, err := l.Append(context.Background(), recs...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRefuseMaxBytes: under Refuse, Allow answers ErrDiskFull naming
// MaxBytes once the spools pass it, counts the refusals, and lets appends
// through again once they are back under it.
func TestRefuseMaxBytes(t *testing.T) {
	dir := t.TempDir()
	logs, list := spools(t, dir, "s")
	appendKB(t, logs["s"], 64)
	g, err := diskguard.New(diskguard.Config{Limits: diskguard.Limits{MaxBytes: 32 << 10, MinFreePercent: -1, Interval: 10 * time.Millisecond},
		Dir: dir, Logs: list})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	err = g.Allow()
	if !errors.Is(err, diskguard.ErrDiskFull) || !strings.Contains(err.Error(), "MaxBytes") {
		t.Fatalf("Allow: %v, want ErrDiskFull naming MaxBytes", err)
	}
	if st := g.Status(); st.Refusing == "" || st.Refused != 1 || st.Policy != "refuse" || !st.Warning {
		t.Fatalf("status %+v", st)
	}
	for logs["s"].Bytes() >= 32<<10 {
		if _, _, err := logs["s"].DropOldestSegment(); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "appends allowed again", 0, func() bool { return g.Allow() == nil })
}

// TestDropOldest: under DropOldest the guard deletes the oldest segments
// of the largest spool until the spools are under MaxBytes, lets appends
// through, and leaves the smaller spool alone.
func TestDropOldest(t *testing.T) {
	const max = 96 << 10
	dir := t.TempDir()
	logs, list := spools(t, dir, "small", "big")
	appendKB(t, logs["small"], 16)
	appendKB(t, logs["big"], 320)
	g, err := diskguard.New(diskguard.Config{Limits: diskguard.Limits{MaxBytes: max, MinFreePercent: -1, Policy: diskguard.DropOldest},
		Dir: dir, Logs: list})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Allow(); err != nil {
		t.Fatalf("Allow: %v (DropOldest refuses nothing it can drop)", err)
	}
	if total := logs["small"].Bytes() + logs["big"].Bytes(); total >= max {
		t.Fatalf("the spools hold %d bytes, want under %d", total, max)
	}
	if logs["small"].OldestOffset() != 0 || logs["big"].OldestOffset() == 0 {
		t.Fatalf("oldest offsets: small %d, big %d; want only the big spool cut", logs["small"].OldestOffset(), logs["big"].OldestOffset())
	}
	if st := g.Status(); st.DroppedSegments == 0 || st.DroppedBytes == 0 || st.Policy != "drop-oldest" {
		t.Fatalf("status %+v", st)
	}
}

// TestNewRefusesIncomplete: New wants a directory and Logs; Close is
// idempotent.
func TestNewRefusesIncomplete(t *testing.T) {
	if _, err := diskguard.New(diskguard.Config{Logs: func() map[string]*spool.Log { return nil }}); err == nil {
		t.Fatal("New without Dir: no error")
	}
	if _, err := diskguard.New(diskguard.Config{Dir: t.TempDir()}); err == nil {
		t.Fatal("New without Logs: no error")
	}
	g, err := diskguard.New(diskguard.Config{Dir: t.TempDir(), Logs: func() map[string]*spool.Log { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	g.Close()
}
