package group_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/socket"
)

// TestParkedFetchesBounded: a member that keeps fetching at an empty
// stream without waiting for the replies holds one parked fetch; each
// newer fetch answers the one it replaces, empty, at once.
func TestParkedFetchesBounded(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	if _, err := p.open("empty"); err != nil {
		t.Fatal(err)
	}
	sock, err := socket.New(socket.Dealer, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	if err := sock.Connect(p.srv.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const fetches = 5
	for i := range fetches {
		req := wire.EncodeRequest(&wire.Request{Op: wire.OpFetch, ID: uint32(i + 1), Stream: "empty", Group: "g", Member: "m",
			MaxRecords: 10, WaitMillis: 60_000})
		if err := sock.Send(ctx, socket.Msg{Frames: req}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < fetches; i++ { // the replaced ones, answered empty, oldest first
		m, err := sock.Recv(ctx)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		rep, err := wire.DecodeReply(m.Frames, false)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Status != wire.StatusOK || rep.ID != uint32(i) || len(rep.Records) != 0 {
			t.Fatalf("reply %d: status %d id %d, %d records", i, rep.Status, rep.ID, len(rep.Records))
		}
	}
	short, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel2()
	if m, err := sock.Recv(short); err == nil {
		t.Fatalf("the newest fetch was answered although nothing arrived: %q", m.Frames)
	}
}

// A publisher with nothing to lease does not starve the others: a
// member's fetch waiting there holds buffer slots until its MaxWait ends,
// then those slots go to the fetch loops waiting for them in turn, so a
// publisher that has records gets some. (Slots taken back at once by the
// idle publisher's next fetch kept the records of the other from the
// member for ever.)
func TestIdlePublisherDoesNotStarveOthers(t *testing.T) {
	pubs := publishers(t, 2, 0)
	idle, busy := pubs[0], pubs[1]
	m := member(t, group.MemberConfig{Name: "a", Buffer: 4, MaxWait: 500 * time.Millisecond}, idle, busy)
	testutil.WaitFor(t, "a fetch waiting at the idle publisher", 30*time.Second, func() bool {
		_, ok := idle.groups.Counters("s", "g")
		return ok
	})
	busy.publish(t, "s", 20)
	nextAck(t, m, 20)
}

// A member with fewer buffer slots than fetch loops still fetches from
// every publisher while Next waits (each link's reserve slot): with a
// Buffer of 1 and two publishers, or the default Buffer with three,
// records appended at any one are delivered while fetches wait at the
// idle ones, which never end here (MaxWait of an hour). Without the
// reserve, the slots sat in fetches at the idle publishers and the
// records waited for them to end.
func TestFewSlotsManyPublishers(t *testing.T) {
	for _, tc := range []struct{ buffer, pubs int }{{1, 2}, {0, 3}} {
		t.Run(fmt.Sprintf("buffer%d-pubs%d", tc.buffer, tc.pubs), func(t *testing.T) {
			pubs := publishers(t, tc.pubs, 0)
			m := member(t, group.MemberConfig{Name: "a", Buffer: tc.buffer, MaxWait: time.Hour}, pubs...)
			// Each publisher in turn gets records while the others idle.
			for _, p := range pubs {
				p.publish(t, "s", 3)
				nextAck(t, m, 3)
			}
		})
	}
}

// The reserve slots bound what a member holds: Buffer records, plus one
// per publisher. A member with a Buffer of 1 and two busy publishers
// that took 10 records (and acknowledged none) has at most 3 more
// leased, waiting in its buffer.
func TestReserveSlotsBoundLeases(t *testing.T) {
	pubs := publishers(t, 2, 20)
	m := member(t, group.MemberConfig{Name: "a", Buffer: 1}, pubs...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 10 {
		if _, err := m.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // room for a fetch beyond the bound
	var leased uint64
	for _, p := range pubs {
		c, _ := p.groups.Counters("s", "g")
		leased += c.Delivered
	}
	if leased < 10 || leased > 13 {
		t.Fatalf("%d records leased to a member of Buffer 1 with two publishers that took 10, want 10 to 13", leased)
	}
}

// The reserve slots leave the member's slots whole: after concurrent
// Next calls take every record of three publishers through a Buffer of
// 2 (reserves taken, repaid), then a Next waits while fetches, some by
// the reserve, wait at the idle publishers, and the member closes, its
// slots add up to Buffer again, it owes no link, and every link's
// reserve is free.
func TestReserveKeepsSlotsWhole(t *testing.T) {
	for round := 0; round < 3; round++ {
		const buffer = 2
		m := member(t, group.MemberConfig{Name: "a", Buffer: buffer}, publishers(t, 3, 200)...)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var wg sync.WaitGroup
		var taken atomic.Int64
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for taken.Add(1) <= 600 {
					msg, err := m.Next(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if err := msg.Ack(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		cancel()
		// Every record taken: Next waits, with a fetch (by the
		// reserve, for some) waiting at each idle publisher.
		wctx, wcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		if msg, err := m.Next(wctx); err == nil {
			t.Fatalf("round %d: a record after all were taken: %+v", round, msg)
		}
		wcancel()
		// More slots than Buffer would fill the member's slot channel
		// and hang the handing back: bounded here.
		type count struct{ slots, owed, reserves, links int }
		done := make(chan count, 1)
		go func() {
			var c count
			c.slots, c.owed, c.reserves, c.links = m.CloseAndCountSlots()
			done <- c
		}()
		var c count
		select {
		case c = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: Close hung (slots given back beyond Buffer?)", round)
		}
		slots, owed, reserves, links := c.slots, c.owed, c.reserves, c.links
		if slots != buffer || owed != 0 || reserves != links || links != 3 {
			t.Fatalf("round %d: after close, %d slots (want %d), %d debts, %d of %d reserves free", round, slots, buffer, owed, reserves, links)
		}
	}
}

// A fetch larger than a data frame comes in several (FlagFrames): every
// record reaches the member, once, whole.
func TestFetchOverSeveralFrames(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	const n = 2000 // about 250 KB of replies
	p.publish(t, "s", n)
	m := member(t, group.MemberConfig{Name: "a", Buffer: n, MaxAckPending: n}, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := make([]bool, n)
	for i := 0; i < n; i++ {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if msg.Offset >= n || seen[msg.Offset] || string(msg.Value) != fmt.Sprintf("r%d", msg.Offset) {
			t.Fatalf("record %d: offset %d, value %q (seen before: %v)", i, msg.Offset, msg.Value, msg.Offset < n && seen[msg.Offset])
		}
		seen[msg.Offset] = true
		if err := msg.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
