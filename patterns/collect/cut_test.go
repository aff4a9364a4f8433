package collect_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fastmq/fastmq/patterns/collect"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// TestResumesAcrossCutTail: a collector stopped after the publisher's last
// records resumes, after the publisher's log lost its tail (a torn write
// cut by recovery) and new records took those offsets, with the new
// records: none is missed because the offsets it had recorded now name
// other records.
func TestResumesAcrossCutTail(t *testing.T) {
	dir := t.TempDir()
	l, err := spool.Open(spool.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for b := 0; b < 10; b++ { // ten batches of ten
		recs := make([]spool.Record, 10)
		for i := range recs {
			recs[i].Value = fmt.Appendf(nil, "old %d", b*10+i)
		}
		if _, err := l.Append(context.Background(), recs...); err != nil {
			t.Fatal(err)
		}
	}
	var cur atomic.Pointer[spool.Log]
	cur.Store(l)
	srv, err := pull.NewServer(pull.ServerConfig{Lookup: func(s string) (*spool.Log, bool) {
		l := cur.Load()
		return l, s == "logs" && l != nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	out := t.TempDir()
	cfg := collect.Config{Dir: out, Stream: "logs", Publishers: map[string]string{"h": srv.Endpoints()[0]}}
	run(t, cfg, map[string]int{"h": 100})

	// Cut the log's tail: a torn last batch, which recovery removes,
	// opening a new epoch at 90; then ten new records take 90..99 and
	// five more follow.
	cur.Store(nil)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	sort.Strings(segs)
	last := segs[len(segs)-1]
	fi, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(last, fi.Size()-5); err != nil {
		t.Fatal(err)
	}
	l2, err := spool.Open(spool.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l2.Close() })
	if e, start := l2.Epoch(); l2.NextOffset() != 90 || e == 0 || start != 90 {
		t.Fatalf("reopened log: next %d, epoch %d from %d; want a new epoch at 90", l2.NextOffset(), e, start)
	}
	recs := make([]spool.Record, 15)
	for i := range recs {
		recs[i].Value = fmt.Appendf(nil, "new %d", 90+i)
	}
	if _, err := l2.Append(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
	cur.Store(l2)

	run(t, cfg, map[string]int{"h": 105})
	b, err := os.ReadFile(filepath.Join(out, "h.log"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 0; i < 100; i++ {
		want = append(want, fmt.Sprintf("old %d", i))
	}
	for i := 90; i < 105; i++ {
		want = append(want, fmt.Sprintf("new %d", i))
	}
	if got := strings.TrimSuffix(string(b), "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("output:\n%s\nwant every old record, then every new one (90..104)", got)
	}
}
