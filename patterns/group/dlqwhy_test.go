package group_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/socket"
)

// A dead letter says why (issue 31, item 4): the handler's last reason
// (a nak's or a term's text) and the record's failed deliveries are in
// its headers; Run's naks carry the handler's error.
func TestDeadLetterKeepsWhy(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := member(t, group.MemberConfig{Name: "a", MaxDeliver: 2, Buffer: 1, MaxAckPending: 1}, p)
	// Record 0: naked with a reason, then termed with another.
	msg, err := m.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := msg.NakWithReason(ctx, 0, "db down"); err != nil {
		t.Fatal(err)
	}
	if msg, err = m.Next(ctx); err != nil || msg.Offset != 0 {
		t.Fatalf("redelivery: %v %v", msg, err)
	}
	if err := msg.Term(ctx, "poison record"); err != nil {
		t.Fatal(err)
	}
	shutdown(t, m)
	// In another group, a Run handler fails record 0 twice.
	r := member(t, group.MemberConfig{Name: "b", Group: "g2", MaxDeliver: 2, Buffer: 1, MaxAckPending: 1}, p)
	rctx, rcancel := context.WithCancel(ctx)
	go r.Run(rctx, 1, func(context.Context, *group.Message) error { return errors.New("handler says no") })
	var dls []group.Record
	for _, g := range []string{"g", "g2"} {
		testutil.WaitFor(t, "the dead letter of "+g, 20*time.Second, func() bool {
			d, err := group.DeadLetters(ctx, p.srv.Endpoints()[0], "s", g, 0, 1, socket.Config{})
			if err == nil && len(d) == 1 {
				dls = append(dls, d[0])
				return true
			}
			return false
		})
	}
	rcancel()
	for i, want := range []struct {
		reason, last string
		outcomes     []string
	}{
		{"poison record", "poison record", []string{"nak", "term"}},
		{"max deliveries", "handler says no", []string{"nak", "nak"}},
	} {
		hs := map[string]string{}
		for _, h := range dls[i].Headers {
			hs[h.Key] = string(h.Value)
		}
		if hs[group.HeaderDLQReason] != want.reason || hs[group.HeaderDLQLastReason] != want.last {
			t.Errorf("dead letter %d: reason %q, last reason %q; want %q, %q", i, hs[group.HeaderDLQReason], hs[group.HeaderDLQLastReason], want.reason, want.last)
		}
		var hist []struct {
			Delivery uint32
			Member   string
			Outcome  string
			Reason   string
		}
		if err := json.Unmarshal([]byte(hs[group.HeaderDLQHistory]), &hist); err != nil {
			t.Fatalf("dead letter %d: history %q: %v", i, hs[group.HeaderDLQHistory], err)
		}
		if len(hist) != len(want.outcomes) {
			t.Fatalf("dead letter %d: history %+v, want outcomes %v", i, hist, want.outcomes)
		}
		for j, h := range hist {
			if h.Delivery != uint32(j+1) || h.Outcome != want.outcomes[j] || h.Member == "" {
				t.Errorf("dead letter %d: history %+v, want outcomes %v", i, hist, want.outcomes)
			}
		}
		if i == 0 && hist[0].Reason != "db down" {
			t.Errorf("the nak's reason in the history: %+v", hist)
		}
	}
}
