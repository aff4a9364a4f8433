package group_test

import (
	"context"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/spool"
)

// A delayed record is not leased before its time and does not hold up
// the records behind it.
func TestDelayedDelivery(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	l, err := p.open("s")
	if err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(400 * time.Millisecond)
	if _, err := l.Append(context.Background(),
		spool.Record{Value: []byte("later"), Headers: []spool.Header{group.NotBefore(due)}},
		spool.Record{Value: []byte("now")}); err != nil {
		t.Fatal(err)
	}
	// A fetch waits a minute at the publisher: a delayed record that only
	// the next fetch would find comes far too late for ctx.
	m := member(t, group.MemberConfig{MaxWait: time.Minute}, p)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msg, err := m.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Value) != "now" {
		t.Fatalf("first record %q, want the one behind the delayed record", msg.Value)
	}
	msg.Ack(ctx)
	msg, err = m.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Value) != "later" || time.Now().Before(due) {
		t.Fatalf("got %q at %v, due %v", msg.Value, time.Now(), due)
	}
	if msg.Delivery != 1 {
		t.Fatalf("delayed record: delivery %d, want 1", msg.Delivery)
	}
	msg.Ack(ctx)

	// Appended while the member's fetch waits at the publisher: leased
	// when due, not when that fetch ends.
	got := make(chan *group.Message, 1)
	go func() {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- msg
	}()
	time.Sleep(100 * time.Millisecond) // let the fetch park
	due = time.Now().Add(300 * time.Millisecond)
	if _, err := l.Append(context.Background(),
		spool.Record{Value: []byte("parked"), Headers: []spool.Header{group.NotBefore(due)}}); err != nil {
		t.Fatal(err)
	}
	msg = <-got
	if msg == nil {
		return
	}
	if string(msg.Value) != "parked" || time.Now().Before(due) {
		t.Fatalf("got %q at %v, due %v", msg.Value, time.Now(), due)
	}
	msg.Ack(ctx)
}

// A delayed record of an ordered group held behind an earlier record of
// its key is leased when due once that one is settled: not when the
// member's next fetch comes.
func TestDelayedBehindItsKey(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	l, err := p.open("s")
	if err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(700 * time.Millisecond)
	if _, err := l.Append(context.Background(),
		spool.Record{Value: []byte("a"), Headers: []spool.Header{group.Key("k")}},
		spool.Record{Value: []byte("b"), Headers: []spool.Header{group.Key("k"), group.NotBefore(due)}}); err != nil {
		t.Fatal(err)
	}
	m := member(t, group.MemberConfig{Ordered: true, MaxWait: time.Minute}, p)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msg, err := m.Next(ctx)
	if err != nil || string(msg.Value) != "a" {
		t.Fatalf("first: %v %v", msg, err)
	}
	if err := msg.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	msg, err = m.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Value) != "b" || time.Now().Before(due) {
		t.Fatalf("got %q at %v, due %v", msg.Value, time.Now(), due)
	}
}

// A delayed record read by the clock's own pass (a lease ran out, which
// made room for the member's waiting fetch) is leased when due: the
// wake-up it asks for during the pass is kept.
func TestDelayedReadByTheClock(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	l, err := p.open("s")
	if err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(800 * time.Millisecond)
	if _, err := l.Append(context.Background(), spool.Record{Value: []byte("held")},
		spool.Record{Value: []byte("later"), Headers: []spool.Header{group.NotBefore(due)}}); err != nil {
		t.Fatal(err)
	}
	m := member(t, group.MemberConfig{MaxAckPending: 1, Buffer: 1, AckWait: 200 * time.Millisecond, MaxDeliver: 1, MaxWait: time.Minute}, p)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msg, err := m.Next(ctx) // leased, never acked: its lease runs out
	if err != nil || string(msg.Value) != "held" {
		t.Fatalf("first: %v %v", msg, err)
	}
	msg, err = m.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Value) != "later" || time.Now().Before(due) {
		t.Fatalf("got %q at %v, due %v", msg.Value, time.Now(), due)
	}
}
