package pull_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// copySpool copies the files of a spool directory (not its lock), as a
// disk would hold them.
func copySpool(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// TestConsumerAfterLossOfRecordsVisibleBeforeSync is the consumer's side
// of spool.Config.VisibleBeforeSync's guarantee: records a consumer over
// loopback read and committed (up to 1050) are missing from the crash
// image (the files copied when 1000 records were in, the checkpoint at
// 1000), as after an OS crash that lost records served before their
// fdatasync. The reopened log starts a new epoch at 1000, and the consumer
// is told the range 1000..1049 it read is gone and gets every new record
// at those offsets, instead of skipping them as if it had read them. The
// image is built by copying files, so this holds with or without the
// option; that the option serves records before their fdatasync, and that
// its checkpoint never runs ahead of one, is tested in the spool package
// (TestVisibleBeforeSync, TestVisibleBeforeSyncCrash).
func TestConsumerAfterLossOfRecordsVisibleBeforeSync(t *testing.T) {
	dir := t.TempDir()
	l, err := spool.Open(spool.Config{Dir: dir, VisibleBeforeSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendBatches(t, l, "old", 0, 1000, 10)
	testutil.WaitFor(t, "checkpoint at 1000", 0, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
		return err == nil && len(b) > 0 && containsAcked(b, 1000)
	})
	crashed := copySpool(t, dir) // the disk when the OS crashes: nothing after 1000 made it

	appendBatches(t, l, "old", 1000, 50, 10)
	var cur atomic.Pointer[spool.Log]
	cur.Store(l)
	srv := swappableServer(t, &cur)
	store, err := spool.OpenOffsets(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg := pull.ConsumerConfig{Stream: "logs", Publishers: map[string]string{"p": srv.Endpoints()[0]}, Offsets: store, CommitInterval: -1}
	c := startConsumer(t, cfg)
	expectRecords(t, c, "p", "old", span(0, 1050))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cur.Store(nil)

	l2 := openSpool(t, spool.Config{Dir: crashed, VisibleBeforeSync: true})
	r := l2.Recovery()
	if e, start := l2.Epoch(); !r.Unclean || r.Lost() != 0 || l2.NextOffset() != 1000 || e == 0 || start != 1000 {
		t.Fatalf("reopened crash image: %+v, next %d, epoch %d from %d; want an unclean close, a new epoch at 1000", r, l2.NextOffset(), e, start)
	}
	appendBatches(t, l2, "new", 1000, 60, 10)
	cur.Store(l2)
	c = startConsumer(t, cfg)
	for i, o := range span(1000, 1060) {
		m := next(t, c)
		if m.Offset != o || string(m.Value) != fmt.Sprintf("new-%d", o) || m.Reset != (i == 0) {
			t.Fatalf("got %q@%d (reset %v), want new-%d@%d", m.Value, m.Offset, m.Reset, o, o)
		}
		c.Ack(m)
	}
	expectNothingMore(t, c)
	if st, _ := publisherStats(c, "p"); st.Diverged != 1 || st.RecordsReplaced != 50 {
		t.Fatalf("stats %+v: want one divergence replacing 50 records", st)
	}
}

// containsAcked reports whether meta.json b holds the checkpoint acked.
func containsAcked(b []byte, acked uint64) bool {
	return regexp.MustCompile(fmt.Sprintf(`"acked":%d[,}]`, acked)).Match(b)
}
