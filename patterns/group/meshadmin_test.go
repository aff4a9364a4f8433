package group_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/spool"
)

// An Admin asks every publisher it is given and answers per publisher:
// with one of two publishers down, every call still answers for the
// other, and the down one's result carries an error.
func TestAdminOnePublisherDown(t *testing.T) {
	up, down := newPublisher(t, t.TempDir()), newPublisher(t, t.TempDir())
	up.publish(t, "s", 5)
	down.publish(t, "s", 5)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Group g on both: record 0 of up acknowledged, record 1 of up
	// terminated (a dead letter). Group h on up only, without dead
	// letters.
	m := member(t, group.MemberConfig{Name: "a", Buffer: 1, MaxAckPending: 1}, up, down)
	for termed := false; !termed; { // up leases its records in order, one at a time
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Offset == 1 && msg.Publisher == "p0" {
			err, termed = msg.Term(ctx, "poison"), true
		} else {
			err = msg.Ack(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "the dead letter", 0, func() bool { return up.groups.Stats()["s/g"].DeadLettered == 1 })
	shutdown(t, m)
	h := member(t, group.MemberConfig{Name: "b", Group: "h"}, up)
	if _, err := h.Next(ctx); err != nil {
		t.Fatal(err)
	}
	shutdown(t, h)
	pubs := []group.Publisher{{Name: "up", Endpoint: up.srv.Endpoints()[0]}, {Name: "down", Endpoint: down.srv.Endpoints()[0]}}
	down.close()

	var asked []string
	adm, err := group.NewAdmin(group.AdminConfig{
		Publishers: func(ctx context.Context, stream string) ([]group.Publisher, error) {
			asked = append(asked, stream)
			return pubs, nil
		},
		Timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	// check fails the test unless a call gave a result per publisher, the
	// down one's alone an error.
	check := func(what string, n int, errs ...error) {
		t.Helper()
		if n != 2 || errs[0] != nil || errs[1] == nil {
			t.Fatalf("%s: %d results, errors %v; want 2, the down publisher's alone", what, n, errs)
		}
	}

	list, err := adm.List(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	check("List", len(list), list[0].Err, list[1].Err)
	if list[0].Publisher != pubs[0] || list[1].Publisher != pubs[1] || len(list[0].Value) != 2 || list[0].Value[0].Group != "g" {
		t.Fatalf("List: %+v", list)
	}

	info, err := adm.Info(ctx, "s", "g")
	if err != nil {
		t.Fatal(err)
	}
	check("Info", len(info), info[0].Err, info[1].Err)
	if st := info[0].Value; st.Floor != 2 || st.DeadLettered != 1 {
		t.Fatalf("Info of up: %+v", st)
	}

	dl, err := adm.DeadLetters(ctx, "s", "g", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	check("DeadLetters", len(dl), dl[0].Err, dl[1].Err)
	if len(dl[0].Value) != 1 || string(dl[0].Value[0].Value) != "r1" {
		t.Fatalf("DeadLetters of up: %+v", dl[0].Value)
	}
	// A group up knows without dead letters, and one it does not know.
	if dl, err := adm.DeadLetters(ctx, "s", "h", 0, 10); err != nil || !errors.Is(dl[0].Err, group.ErrNoDeadLetters) {
		t.Fatalf("DeadLetters of group h: %+v, %v; want ErrNoDeadLetters on up", dl, err)
	}
	var se *group.StatusError
	if dl, err := adm.DeadLetters(ctx, "s", "nosuch", 0, 10); err != nil || !errors.As(dl[0].Err, &se) || se.Status != group.StatusUnknown {
		t.Fatalf("DeadLetters of an unknown group: %+v, %v; want StatusUnknown on up", dl, err)
	}

	rep, err := adm.Replay(ctx, "s", "g", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	check("Replay", len(rep), rep[0].Err, rep[1].Err)
	if r := rep[0].Value; r.Replayed != 1 {
		t.Fatalf("Replay on up: %+v", r)
	}
	if rep, err := adm.Replay(ctx, "s", "h", 0, 0); err != nil || !errors.Is(rep[0].Err, group.ErrNoDeadLetters) {
		t.Fatalf("Replay of group h: %+v, %v; want ErrNoDeadLetters on up", rep, err)
	}

	seek, err := adm.Seek(ctx, "s", "g", spool.Earliest())
	if err != nil {
		t.Fatal(err)
	}
	check("Seek", len(seek), seek[0].Err, seek[1].Err)
	if st := seek[0].Value; st.Floor != 0 || st.Lag != 5 {
		t.Fatalf("Seek on up: %+v (want floor 0, lag 5: its 5 records; the replay appended none)", st)
	}
	if len(asked) != 8 || asked[0] != "s" {
		t.Fatalf("publishers asked for %q", asked)
	}

	// The finder's error ends a call; an Admin needs a finder.
	none := errors.New("no publisher found")
	adm, err = group.NewAdmin(group.AdminConfig{Publishers: func(context.Context, string) ([]group.Publisher, error) { return nil, none }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.List(ctx, group.AllStreams); !errors.Is(err, none) {
		t.Fatalf("List without publishers: %v", err)
	}
	if _, err := group.NewAdmin(group.AdminConfig{}); err == nil {
		t.Fatal("NewAdmin without Publishers: no error")
	}
}
