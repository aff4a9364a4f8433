package group_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

func appendValues(t *testing.T, p *publisher, prefix string, n int) {
	t.Helper()
	l, err := p.open("s")
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]spool.Record, n)
	for i := range recs {
		recs[i].Value = fmt.Appendf(nil, "%s-%d", prefix, i)
	}
	if _, err := l.Append(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
}

// takeAll leases n records from m and acknowledges each; it returns
// their values by offset.
func takeAll(t *testing.T, m *group.Member, n int) map[uint64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := map[uint64]string{}
	for len(got) < n {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatalf("after %d records: %v", len(got), err)
		}
		if _, dup := got[msg.Offset]; dup {
			t.Fatalf("offset %d delivered twice", msg.Offset)
		}
		got[msg.Offset] = string(msg.Value)
		if err := msg.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// TestGroupFollowsEpochs: a group acknowledged records that the
// publisher's disk then lost (records served before their fdatasync,
// spool.Config.VisibleBeforeSync, and an OS crash; the group's own journal
// was written). The stream reopens at its durable end in a new epoch and
// new records take the lost offsets: the group delivers them, instead of
// taking them for the acknowledged records that are gone, and Floors does
// not report the lost records as acknowledged (interest retention would
// remove the new ones). Across a later clean restart nothing comes back.
func TestGroupFollowsEpochs(t *testing.T) {
	dir := t.TempDir()
	p := newPublisher(t, dir)
	appendValues(t, p, "old", 50)
	crash := filepath.Join(t.TempDir(), "crash")
	// The stream as the disk holds it at the crash: 50 records durable,
	// the log never closed.
	copyDir(t, filepath.Join(dir, "streams"), filepath.Join(crash, "streams"))
	appendValues(t, p, "lost", 50) // offsets 50..99, never on that disk
	// Group g holds its acknowledgements in its journal, group h in its
	// snapshot (a seek writes one).
	for _, name := range []string{"g", "h"} {
		m := member(t, group.MemberConfig{Name: "a", Group: name}, p)
		if got := takeAll(t, m, 100); got[99] != "lost-49" {
			t.Fatalf("before the crash: offset 99 is %q", got[99])
		}
		shutdown(t, m)
	}
	ctx := context.Background()
	if st, err := group.Seek(ctx, p.srv.Endpoints()[0], "s", "h", spool.Latest(), socket.Config{}); err != nil || st.Floor != 100 {
		t.Fatalf("seek: %+v, %v", st, err)
	}
	// The groups' states on disk at the crash: all 100 acknowledged.
	copyDir(t, filepath.Join(dir, "groups"), filepath.Join(crash, "groups"))

	p2 := newPublisher(t, crash)
	l, err := p2.open("s")
	if err != nil {
		t.Fatal(err)
	}
	if r := l.Recovery(); !r.NewEpoch || l.NextOffset() != 50 {
		t.Fatalf("the stream after the crash: %+v, next %d", r, l.NextOffset())
	}
	if f := p2.groups.Floors("s"); len(f) != 2 || f["g"] > 50 || f["h"] > 50 {
		t.Fatalf("Floors after the crash: %v, want g and h at or below 50", f)
	}
	appendValues(t, p2, "new", 30) // offsets 50..79
	// The log's end has passed the lost records' again: only the epoch
	// tells them apart.
	if f := p2.groups.Floors("s"); f["g"] > 50 || f["h"] > 50 {
		t.Fatalf("Floors after new records: %v, want g and h at or below 50", f)
	}
	for _, name := range []string{"g", "h"} {
		m := member(t, group.MemberConfig{Name: "b", Group: name}, p2)
		got := takeAll(t, m, 30)
		for i := range 30 {
			if v := got[uint64(50+i)]; v != fmt.Sprintf("new-%d", i) {
				t.Fatalf("group %s after the crash: offset %d is %q, want new-%d (got %v)", name, 50+i, v, i, got)
			}
		}
		testutil.WaitFor(t, "the group's floor at 80", 0, func() bool { return p2.groups.Stats()["s/"+name].Floor == 80 })
		shutdown(t, m)
	}
	p2.close()

	p3 := newPublisher(t, crash)
	appendValues(t, p3, "later", 5) // offsets 80..84
	m3 := member(t, group.MemberConfig{Name: "c"}, p3)
	got := takeAll(t, m3, 5)
	for i := range 5 {
		if v := got[uint64(80+i)]; v != fmt.Sprintf("later-%d", i) {
			t.Fatalf("after a clean restart: got %v, want later-0..4 at 80..84", got)
		}
	}
}
