package group_test

import (
	"context"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// A replay gives a group's dead letters back to that group only (issue
// 31, item 3): the other group of the stream, which acknowledged the
// records, gets nothing again and the stream no new record; the records
// come back at their own offsets with their own headers. The reopened
// records and the note of what was replayed are written together: after
// a restart the record is still pending, once, and a replay asked again
// replays nothing.
func TestReplayOnlyToItsGroup(t *testing.T) {
	dir := t.TempDir()
	p := newPublisher(t, dir)
	l, err := p.open("s")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range []string{"a", "b", "c"} {
		if _, err := l.Append(ctx, spool.Record{Value: []byte(v), Headers: []spool.Header{{Key: "h", Value: []byte(v)}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []string{"g", "h"} {
		m := member(t, group.MemberConfig{Name: "m" + g, Group: g, Buffer: 1, MaxAckPending: 1}, p)
		for range 3 {
			msg, err := m.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if g == "g" && msg.Offset == 1 {
				err = msg.Term(ctx, "bad")
			} else {
				err = msg.Ack(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		shutdown(t, m)
	}
	testutil.WaitFor(t, "g's dead letter", 0, func() bool { return p.groups.Stats()["s/g"].DeadLettered == 1 })
	res, err := group.Replay(ctx, p.srv.Endpoints()[0], "s", "g", 0, 0, socket.Config{})
	if err != nil || res.Replayed != 1 {
		t.Fatalf("replay: %+v %v", res, err)
	}
	check := func(when string) {
		t.Helper()
		if l.NextOffset() != 3 {
			t.Fatalf("%s: the stream holds %d records, want its 3", when, l.NextOffset())
		}
		st := p.groups.Stats()
		if h := st["s/h"]; h.Floor != 3 || h.Pending != 0 {
			t.Fatalf("%s: the other group: %+v", when, h)
		}
		if g := st["s/g"]; g.Floor != 1 || g.Pending != 1 || g.Next != 3 {
			t.Fatalf("%s: the group: floor %d pending %d next %d, want 1 1 3", when, g.Floor, g.Pending, g.Next)
		}
	}
	check("after the replay")
	p.close()
	p = newPublisher(t, dir)
	if l, err = p.open("s"); err != nil {
		t.Fatal(err)
	}
	p.open(group.DLQStream("s", "g"))
	if res, err = group.Replay(ctx, p.srv.Endpoints()[0], "s", "g", 0, 0, socket.Config{}); err != nil || res.Replayed != 0 || res.Skipped != 1 {
		t.Fatalf("replay after the restart: %+v %v", res, err)
	}
	for _, g := range []string{"g", "h"} { // load both
		if _, err := group.Info(ctx, p.srv.Endpoints()[0], "s", g, socket.Config{}); err != nil {
			t.Fatal(err)
		}
	}
	check("after a restart and a second replay")
	m := member(t, group.MemberConfig{Name: "m2", Buffer: 1}, p)
	msg, err := m.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Offset != 1 || string(msg.Value) != "b" || len(msg.Headers) != 1 || string(msg.Headers[0].Value) != "b" {
		t.Fatalf("replayed record: %+v", msg)
	}
	if err := msg.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if g := p.groups.Stats()["s/g"]; g.Floor != 3 || g.Pending != 0 {
		t.Fatalf("after its ack: %+v", g)
	}
}
