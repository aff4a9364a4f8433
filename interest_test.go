package fastmq_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/metrics"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/spool"
)

// TestInterestRetention: with Interest.Retain, records group a acknowledged
// and group b did not are kept; once b acknowledges them they go at the
// next retention pass; the age cap removes records a group has not
// acknowledged anyway, and that is reported (status, metrics, log). A group
// far behind is reported, and logged once as it crosses the threshold.
func TestInterestRetention(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logs testutil.LogBuffer
	n, err := fastmq.New(fastmq.Config{Name: "interest", DataDir: filepath.Join(t.TempDir(), "n"),
		Spool:    spool.Config{SegmentBytes: 4 << 10, RetentionAge: time.Hour, RetentionInterval: time.Hour},
		Interest: fastmq.InterestConfig{Retain: true, BehindRecords: 50, CheckInterval: time.Hour},
		Logger:   slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	const total = 200
	recs := make([]spool.Record, total)
	for i := range recs {
		recs[i].Value = bytes.Repeat([]byte{'x'}, 100)
	}
	for i := 0; i < total; i += 10 {
		if _, err := n.Append(ctx, "s", recs[i:i+10]...); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := n.Stream("s")
	if st := l.Stats(); st.Segments < 4 {
		t.Fatalf("want several segments, have %d", st.Segments)
	}
	cfg := group.MemberConfig{AckWait: time.Hour, Buffer: 4}
	// Group a acknowledges everything.
	ma, err := n.Group(fastmq.GroupConfig{Stream: "s", Group: "a", Member: cfg})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < total; i++ {
		msg, err := ma.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := msg.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Group b takes one record and settles nothing.
	mb, err := n.Group(fastmq.GroupConfig{Stream: "s", Group: "b", Member: cfg})
	if err != nil {
		t.Fatal(err)
	}
	held, err := mb.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "a's acks on disk", 0, func() bool { return n.GroupStats()["s/a"].Floor == total })

	apply := func(l *spool.Log) {
		t.Helper()
		if _, err := l.ApplyRetention(); err != nil {
			t.Fatal(err)
		}
	}
	apply(l)
	if l.OldestOffset() != 0 {
		t.Fatalf("records b has not acknowledged were removed: oldest %d", l.OldestOffset())
	}
	behind := n.GroupsBehind()
	if len(behind) != 1 || behind[0].Group != "b" || behind[0].Records != total || behind[0].Bytes <= 0 || behind[0].Capped {
		t.Fatalf("groups behind: %+v", behind)
	}
	// The log line comes once as b crosses the threshold, not at every look.
	for range 3 {
		n.CheckGroupsBehind()
	}
	if c := logs.Count("consumer group far behind"); c != 1 {
		t.Fatalf("%d far-behind log lines for one crossing, want 1:\n%s", c, logs.String())
	}

	// b acknowledges everything: the records become eligible and go.
	if err := held.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < total; i++ {
		msg, err := mb.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := msg.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "b's acks on disk", 0, func() bool { return n.GroupStats()["s/b"].Floor == total })
	apply(l)
	if l.OldestOffset() == 0 || l.RetentionForced() != 0 {
		t.Fatalf("after every group acknowledged: oldest %d, forced %d", l.OldestOffset(), l.RetentionForced())
	}
	if b := n.GroupsBehind(); len(b) != 0 {
		t.Fatalf("groups behind after acks: %+v", b)
	}
	n.CheckGroupsBehind()
	if logs.Count("consumer group caught up") != 1 {
		t.Fatalf("no caught-up line:\n%s", logs.String())
	}

	// The age cap: records older than RetentionAge go although group c
	// has not acknowledged them, and that is reported.
	if _, err := n.Stream("old"); err != nil {
		t.Fatal(err)
	}
	mc, err := n.Group(fastmq.GroupConfig{Stream: "old", Group: "c", Member: cfg})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "group c known", 0, func() bool { _, ok := n.GroupStats()["old/c"]; return ok })
	old := make([]spool.Record, total)
	for i := range old {
		old[i] = spool.Record{Time: time.Now().Add(-2 * time.Hour), Value: bytes.Repeat([]byte{'o'}, 100)}
	}
	for i := 0; i < total; i += 10 {
		if _, err := n.Append(ctx, "old", old[i:i+10]...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Append(ctx, "old", spool.Record{Value: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Next(ctx); err != nil {
		t.Fatal(err)
	}
	lo, _ := n.Stream("old")
	apply(lo)
	if lo.OldestOffset() == 0 || lo.RetentionForced() != lo.OldestOffset() {
		t.Fatalf("age cap: oldest %d, forced %d", lo.OldestOffset(), lo.RetentionForced())
	}
	st := n.Status()
	b, _ := json.Marshal(st)
	if len(st.GroupsBehind) != 1 || !st.GroupsBehind[0].Capped || st.GroupsBehind[0].Group != "c" ||
		!strings.Contains(string(b), `"retention_forced":`+fmt.Sprint(lo.RetentionForced())) {
		t.Fatalf("status: %+v\n%s", st.GroupsBehind, b)
	}
	rec := httptest.NewRecorder()
	metrics.NodeHandler(n).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`fastmq_group_retention_capped{group="c",stream="old"} 1`,
		fmt.Sprintf(`fastmq_stream_retention_forced_records_total{stream="old"} %d`, lo.RetentionForced())} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if logs.Count("retention removed records not yet acknowledged by every group") == 0 {
		t.Error("the cap's removal was not logged")
	}
}

// TestInterestRetentionAfterRestart: after a publisher restart, a group
// whose members have not come back yet still holds its records: the
// publisher knows it from its state file.
func TestInterestRetentionAfterRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "n")
	start := func() *fastmq.Node {
		n, err := fastmq.New(fastmq.Config{Name: "restart", DataDir: dir,
			Spool:    spool.Config{SegmentBytes: 4 << 10, RetentionInterval: time.Hour},
			Interest: fastmq.InterestConfig{Retain: true, CheckInterval: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := start()
	recs := make([]spool.Record, 10)
	for i := range recs {
		recs[i].Value = bytes.Repeat([]byte{'x'}, 100)
	}
	for i := 0; i < 20; i++ {
		if _, err := n.Append(ctx, "s", recs...); err != nil {
			t.Fatal(err)
		}
	}
	cfg := group.MemberConfig{AckWait: time.Hour, Buffer: 4}
	settleAll := func(n *fastmq.Node, g string) {
		m, err := n.Group(fastmq.GroupConfig{Stream: "s", Group: g, Member: cfg})
		if err != nil {
			t.Fatal(err)
		}
		for n.GroupStats()["s/"+g].Floor < 200 {
			msg, err := m.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := msg.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
		m.Close()
	}
	settleAll(n, "a")
	mb, err := n.Group(fastmq.GroupConfig{Stream: "s", Group: "b", Member: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mb.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = start()
	defer n.Close()
	// a's member comes back (its floor is all), b's does not.
	ma, err := n.Group(fastmq.GroupConfig{Stream: "s", Group: "a", Member: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer ma.Close()
	testutil.WaitFor(t, "a served again", 0, func() bool { st, ok := n.GroupStats()["s/a"]; return ok && st.Floor == 200 })
	if _, ok := n.GroupStats()["s/b"]; ok {
		t.Fatal("b loaded without a request")
	}
	l, _ := n.Stream("s")
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if l.OldestOffset() != 0 {
		t.Fatalf("b's records removed while its members were away: oldest %d", l.OldestOffset())
	}
	if b := n.GroupsBehind(); len(b) != 0 {
		t.Fatalf("behind with default thresholds: %+v", b)
	}
}
