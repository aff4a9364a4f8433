package group_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/socket"
)

// A Run goroutine's acks go out while its handler blocks: here the
// handler of the k-th record handled waits until the publisher has the
// acks of the k-1 handled before it (one goroutine), so acks held back
// until the goroutine has handled a batch of them would never arrive.
func TestRunAcksWhileHandlerBlocks(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	const n = 5
	p.publish(t, "s", n)
	m := member(t, group.MemberConfig{AckWait: time.Minute}, p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	proceed := make([]chan struct{}, n)
	for i := range proceed {
		proceed[i] = make(chan struct{})
	}
	close(proceed[0])
	done := make(chan error, 1)
	handled := 0 // Run's one goroutine counts
	go func() {
		done <- m.Run(ctx, 1, func(ctx context.Context, msg *group.Message) error {
			k := handled
			handled++
			select {
			case <-proceed[k]:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	for i := 1; i < n; i++ {
		testutil.WaitFor(t, fmt.Sprintf("the acks of the records before %d while its handler waits", i), 0, func() bool {
			return p.groups.Stats()["s/g"].Acked >= uint64(i)
		})
		close(proceed[i])
	}
	testutil.WaitFor(t, "every record acknowledged", 0, func() bool {
		return p.groups.Stats()["s/g"].Acked == n
	})
	cancel()
	<-done
}

// A handler that blocks on one record holds up that record only: Run's
// other goroutines handle every other record, however many the member
// buffered at once.
func TestRunHandlerBlockedHoldsOneRecord(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	const n = 500
	p.publish(t, "s", n)
	m := member(t, group.MemberConfig{Buffer: 256, AckWait: time.Minute}, p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	var mu sync.Mutex
	blocked := -1
	done := make(chan error, 1)
	go func() {
		done <- m.Run(ctx, 4, func(ctx context.Context, msg *group.Message) error {
			mu.Lock()
			first := blocked < 0
			if first {
				blocked = int(msg.Offset)
			}
			mu.Unlock()
			if first {
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return nil
		})
	}()
	testutil.WaitFor(t, "every record but the blocked one acknowledged", 0, func() bool {
		return p.groups.Stats()["s/g"].Acked == n-1
	})
	close(release)
	testutil.WaitFor(t, "the blocked record acknowledged", 0, func() bool {
		return p.groups.Stats()["s/g"].Acked == n
	})
	cancel()
	<-done
}

// A Message no member leased (built by a caller) settles with an error,
// not a panic.
func TestSettleForeignMessage(t *testing.T) {
	var msg group.Message
	if err := msg.Ack(context.Background()); err == nil {
		t.Fatal("ack of a message no member leased succeeded")
	}
}

// Handlers that run long get Run's other goroutines, even for a few
// buffered records: here every handler waits until all four goroutines
// are in one.
func TestRunSlowHandlersSpread(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	const n = 8
	p.publish(t, "s", n)
	m := member(t, group.MemberConfig{AckWait: time.Minute}, p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	inside := 0
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- m.Run(ctx, 4, func(ctx context.Context, msg *group.Message) error {
			mu.Lock()
			inside++
			mu.Unlock()
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	testutil.WaitFor(t, "four handlers running at once", 0, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inside >= 4
	})
	close(release)
	testutil.WaitFor(t, "every record acknowledged", 0, func() bool {
		return p.groups.Stats()["s/g"].Acked == n
	})
	cancel()
	<-done
}

// A handler stopped by the end of Run's ctx (a shutdown) does not nak
// its record: the failure is the shutdown's. The lease goes back on
// Close, and the next member gets the record as its second delivery,
// even with MaxDeliver 1: a lease given back on leaving is no failed
// delivery. A nak would have counted one (and could lease the record
// back to the closing member), and a release that counted would have
// dead-lettered it.
func TestRunShutdownDoesNotNak(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 1)
	cfg := group.MemberConfig{AckWait: time.Minute, MaxDeliver: 1, Buffer: 1}
	a := member(t, cfg, p)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- a.Run(ctx, 1, func(ctx context.Context, msg *group.Message) error {
			close(started)
			<-ctx.Done() // a handler that stops when told, with an error
			return ctx.Err()
		})
	}()
	<-started
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	shutdown(t, a)
	if st := p.groups.Stats()["s/g"]; st.Naked != 0 || st.DeadLetters != 0 {
		t.Fatalf("after the shutdown: %d naked, %d dead-lettered, want none", st.Naked, st.DeadLetters)
	}
	b := member(t, cfg, p)
	nctx, ncancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer ncancel()
	msg, err := b.Next(nctx)
	if err != nil {
		t.Fatalf("the released record: %v", err)
	}
	if msg.Delivery != 2 {
		t.Fatalf("delivery %d, want 2 (one lease to the member shut down)", msg.Delivery)
	}
	if err := msg.Ack(nctx); err != nil {
		t.Fatal(err)
	}
}

// Backoff values the wire cannot carry (negative, or beyond 32 bits of
// milliseconds) are refused when the member is made, instead of wrapping
// into a delay of weeks.
func TestMemberBackoffRange(t *testing.T) {
	base := group.MemberConfig{Stream: "s", Group: "g", Publishers: map[string]string{"p": "tcp://127.0.0.1:1"}}
	for _, b := range [][]time.Duration{{-time.Second}, {time.Second, -1}, {50 * 24 * time.Hour}} {
		cfg := base
		cfg.Backoff = b
		if m, err := group.NewMember(cfg); err == nil {
			m.Close()
			t.Errorf("Backoff %v: no error", b)
		} else if !strings.Contains(err.Error(), "backoff value") {
			t.Errorf("Backoff %v: %v", b, err)
		}
	}
	cfg := base
	cfg.Backoff = []time.Duration{0, time.Second, 49 * 24 * time.Hour}
	m, err := group.NewMember(cfg)
	if err != nil {
		t.Fatalf("Backoff %v: %v", cfg.Backoff, err)
	}
	m.Close()
}

// Members of one group asking different settings do not take turns, nor
// does the member that joined last set them (issue 31, item 11): the
// member whose fetch created the group set them, and only Configure
// changes them. MaxAckPending is each member's own.
func TestGroupSettingsOnlyByConfigure(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 200)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	take := func(m *group.Member) {
		t.Helper()
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := msg.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	settings := func() (time.Duration, int) {
		st := p.groups.Stats()["s/g"]
		return st.AckWait, st.MaxDeliver
	}
	a := member(t, group.MemberConfig{Name: "a", AckWait: 30 * time.Second, MaxDeliver: 2, Buffer: 1, MaxAckPending: 1}, p)
	take(a)
	if w, d := settings(); w != 30*time.Second || d != 2 {
		t.Fatalf("after a's fetch: %v %d", w, d)
	}
	b := member(t, group.MemberConfig{Name: "b", AckWait: 90 * time.Second, MaxDeliver: 10, Buffer: 1, MaxAckPending: 1}, p)
	take(b)
	for range 20 { // both fetch again and again
		take(a)
		take(b)
		if w, d := settings(); w != 30*time.Second || d != 2 {
			t.Fatalf("members' fetches set %v %d, want the group's 30s 2", w, d)
		}
	}
	st, err := group.Configure(ctx, p.srv.Endpoints()[0], "s", "g", group.Settings{AckWait: 90 * time.Second, MaxDeliver: 10}, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if st.AckWait != 90*time.Second || st.MaxDeliver != 10 {
		t.Fatalf("Configure answered %v %d", st.AckWait, st.MaxDeliver)
	}
	take(a)
	if w, d := settings(); w != 90*time.Second || d != 10 {
		t.Fatalf("a's fetch after Configure set %v %d", w, d)
	}
	// The settings are the group's state: a restart keeps them.
	shutdown(t, a)
	shutdown(t, b)
	p.close()
	p = newPublisher(t, p.dir)
	if _, err := p.open("s"); err != nil {
		t.Fatal(err)
	}
	take(member(t, group.MemberConfig{Name: "c", AckWait: time.Second, MaxDeliver: 1, Buffer: 1}, p))
	if w, d := settings(); w != 90*time.Second || d != 10 {
		t.Fatalf("after a restart: %v %d", w, d)
	}
}
