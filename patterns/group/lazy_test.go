package group_test

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/patterns/pull"
)

// settleSpy passes a publisher's group requests on and notes its settle
// requests: how many acks came in requests with and without FlagLazy,
// and when each lazy request came.
type settleSpy struct {
	*group.Server
	mu         sync.Mutex
	lazyAcks   int
	urgentAcks int
	came       map[uint32]time.Time // lazy requests, by id
}

func (s *settleSpy) Handle(env [][]byte, frames [][]byte) {
	now := time.Now()
	req, err := wire.DecodeRequest(frames)
	if err == nil && (req.Op == wire.OpAck || req.Op == wire.OpAckRanges) {
		n := len(req.Entries)
		for _, r := range req.Ranges {
			n += int(r.Count)
		}
		s.mu.Lock()
		if req.Flags&wire.FlagLazy != 0 {
			s.lazyAcks += n
			s.came[req.ID] = now
		} else {
			s.urgentAcks += n
		}
		s.mu.Unlock()
	}
	s.Server.Handle(env, frames)
}

func (s *settleSpy) counts() (lazy, urgent int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lazyAcks, s.urgentAcks
}

// replySpy notes when the group server's replies went out, by request
// id.
type replySpy struct {
	group.Sender
	mu   sync.Mutex
	sent map[uint32]time.Time
}

func (r *replySpy) Send(env [][]byte, frames [][]byte) error {
	if len(frames) > 0 && len(frames[0]) >= 6 {
		r.mu.Lock()
		r.sent[binary.BigEndian.Uint32(frames[0][2:])] = time.Now()
		r.mu.Unlock()
	}
	return r.Sender.Send(env, frames)
}

// runCounting runs m.Run with one goroutine whose handler counts the
// records and acks them; stop ends it, and done gets Run's error.
func runCounting(m *group.Member) (handled *atomic.Int32, stop func(), done <-chan error) {
	handled = new(atomic.Int32)
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	ch := make(chan error, 1)
	go func() {
		ch <- m.Run(ctx, 1, func(context.Context, *group.Message) error {
			handled.Add(1)
			return nil
		})
	}()
	return handled, stop, ch
}

// Run's acks go as lazy settles, which the publisher holds up to its
// LazyCommit before the group commit that answers them (never sooner),
// and which are on disk once Run returns.
func TestLazySettlesWaitForTheCommit(t *testing.T) {
	const lazyCommit = 300 * time.Millisecond
	var spy *settleSpy
	replies := &replySpy{sent: map[uint32]time.Time{}}
	p := newPublisherWrapped(t, t.TempDir(), func(cfg *group.ServerConfig) {
		cfg.LazyCommit = lazyCommit
		replies.Sender = cfg.Send
		cfg.Send = replies
	}, func(gs *group.Server, _ *pull.Server) pull.Extension {
		spy = &settleSpy{Server: gs, came: map[uint32]time.Time{}}
		return spy
	})
	p.publish(t, "s", 20)
	m := member(t, group.MemberConfig{Name: "a"}, p)
	handled, stop, done := runCounting(m)
	testutil.WaitFor(t, "20 records handled and their acks sent", 0, func() bool {
		lazy, _ := spy.counts()
		return handled.Load() == 20 && lazy == 20
	})
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if _, urgent := spy.counts(); urgent != 0 {
		t.Fatalf("%d of Run's acks were sent without FlagLazy", urgent)
	}
	if f := p.groups.Floors("s")["g"]; f != 20 {
		t.Fatalf("floor on disk %d after Run returned, want 20", f)
	}
	spy.mu.Lock()
	first, at := uint32(0), time.Time{}
	for id, c := range spy.came {
		if at.IsZero() || c.Before(at) {
			first, at = id, c
		}
	}
	spy.mu.Unlock()
	replies.mu.Lock()
	sent, ok := replies.sent[first]
	replies.mu.Unlock()
	if !ok {
		t.Fatalf("the first lazy request (%d) was never answered", first)
	}
	if waited := sent.Sub(at); waited < lazyCommit {
		t.Fatalf("the first lazy settle was answered %v after it came, before LazyCommit (%v)", waited, lazyCommit)
	}
}

// A settle a caller waits for (here InProgress, from a Run handler) is
// committed at once, however long LazyCommit is, and the lazy acks
// waiting at the publisher go to disk with it.
func TestUrgentSettleCommitsLazyOnes(t *testing.T) {
	defer group.SetMaxLazyCommit(time.Hour)()
	var spy *settleSpy
	p := newPublisherWrapped(t, t.TempDir(), func(cfg *group.ServerConfig) {
		cfg.LazyCommit = time.Hour
	}, func(gs *group.Server, _ *pull.Server) pull.Extension {
		spy = &settleSpy{Server: gs, came: map[uint32]time.Time{}}
		return spy
	})
	p.publish(t, "s", 9)
	m := member(t, group.MemberConfig{Name: "a"}, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rctx, stop := context.WithCancel(ctx)
	floor := make(chan uint64, 1)
	done := make(chan error, 1)
	go func() {
		done <- m.Run(rctx, 1, func(ctx context.Context, msg *group.Message) error {
			if msg.Offset == 9 {
				// Bounded below the 10 s a held lazy request waits for
				// its answer: were InProgress queued behind it, the
				// bound ends it first.
				ictx, cancel := context.WithTimeout(ctx, 8*time.Second)
				defer cancel()
				if err := msg.InProgress(ictx); err != nil {
					t.Errorf("InProgress: %v", err)
				}
				floor <- p.groups.Floors("s")["g"]
			}
			return nil
		})
	}()
	testutil.WaitFor(t, "the acks of records 0-8 at the publisher", 0, func() bool {
		lazy, _ := spy.counts()
		return lazy == 9
	})
	if f := p.groups.Floors("s")["g"]; f != 0 {
		t.Fatalf("floor on disk %d with only lazy acks and an hour's LazyCommit, want 0", f)
	}
	p.publish(t, "s", 1)
	if f := <-floor; f != 9 {
		t.Fatalf("floor on disk %d once InProgress returned, want 9 (the lazy acks committed with it)", f)
	}
	stop()
	shutdown(t, m) // its leave is committed at once: Run's last lazy ack with it
	if err := <-done; err == nil {
		t.Fatal("Run returned nil")
	}
}
