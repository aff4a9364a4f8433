package spool_test

import (
	"testing"
	"time"

	"github.com/fastmq/fastmq/spool"
	"github.com/fastmq/fastmq/spool/spooltest"
)

// TestMinSyncInterval: group fsyncs start at least MinSyncInterval apart
// however fast the appends come, so their count is bounded by the time the
// appends took.
func TestMinSyncInterval(t *testing.T) {
	const interval = 5 * time.Millisecond
	l := openPaced(t, spool.Config{Dir: t.TempDir(), GroupInterval: -1, MinSyncInterval: interval})
	spooltest.CheckSyncPacing(t, l, interval)
}

// TestEarlySyncPacing: the fsyncs of a Log with VisibleBeforeSync alone
// are paced at EarlySyncInterval.
func TestEarlySyncPacing(t *testing.T) {
	l := openPaced(t, spool.Config{Dir: t.TempDir(), GroupInterval: -1, VisibleBeforeSync: true})
	spooltest.CheckSyncPacing(t, l, spool.EarlySyncInterval)
}

func openPaced(t *testing.T, cfg spool.Config) *spool.Log {
	t.Helper()
	l, err := spool.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
