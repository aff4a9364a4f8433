package fastmq_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
)

// TestGroupQueueAcrossNodes: 2 publishers x 3 member nodes of one group;
// one member node dies abruptly holding leases (AckWait one minute): every
// record is acknowledged once in the publishers' state and processed at
// least once, and only the dead member's leases come back, within gossip's
// failure detection rather than AckWait.
func TestGroupQueueAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node loopback test")
	}
	seed := newNode(t, "gpub-0")
	pubs := []*fastmq.Node{seed, newNode(t, "gpub-1", seed.GossipAddr())}
	const n = 200
	for _, p := range pubs {
		publish(t, p, "jobs", n)
	}
	type key struct {
		pub string
		off uint64
	}
	var mu sync.Mutex
	processed := map[key]int{}
	redelivered := map[key]bool{}
	cfg := group.MemberConfig{AckWait: time.Minute, Buffer: 4}

	// The victim leases a few records and never settles them. Its buffer
	// holds one record: a member's links gather free buffer slots before
	// they fetch, so a larger buffer split between the links of two
	// publishers may stay partly empty, and the victim's lease count
	// would depend on timing.
	victim := newNode(t, "gmem-victim", seed.GossipAddr())
	vcfg := cfg
	vcfg.Buffer = 1
	vm, err := victim.Group(fastmq.GroupConfig{Stream: "jobs", Group: "workers", Member: vcfg})
	if err != nil {
		t.Fatal(err)
	}
	held := map[key]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for len(held) < 4 {
		msg, err := vm.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held[key{msg.Publisher, msg.Offset}] = true
	}
	// Its buffer fills up too (one record, leased, and up to one more
	// per publisher that a link's reserve fetched while Next waited);
	// then it holds its leases for good. They are counted once the
	// count stays the same for a while.
	pending := func() int {
		n := 0
		for _, p := range pubs {
			n += p.GroupStats()["jobs/workers"].Pending
		}
		return n
	}
	victimLeases := 0
	testutil.WaitFor(t, "the victim's buffer full", 0, func() bool {
		before := pending()
		time.Sleep(time.Second)
		victimLeases = pending()
		return victimLeases == before && victimLeases > len(held)
	})
	if max := len(held) + vcfg.Buffer + len(pubs); victimLeases > max {
		t.Fatalf("the victim holds %d leases, more than %d: its %d taken, its buffer of %d and one per publisher", victimLeases, max, len(held), vcfg.Buffer)
	}
	var wg sync.WaitGroup
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	for i := 0; i < 2; i++ {
		mn := newNode(t, fmt.Sprintf("gmem-%d", i), seed.GossipAddr())
		m, err := mn.Group(fastmq.GroupConfig{Stream: "jobs", Group: "workers", Member: cfg})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Run(runCtx, 4, func(ctx context.Context, msg *group.Message) error {
				mu.Lock()
				k := key{msg.Publisher, msg.Offset}
				processed[k]++
				if msg.Delivery > 1 {
					redelivered[k] = true
				}
				mu.Unlock()
				return nil
			})
		}()
	}
	testutil.WaitFor(t, "the others process all but the victim's leases", 30*time.Second, func() bool {
		acked := uint64(0)
		for _, p := range pubs {
			acked += p.GroupStats()["jobs/workers"].Acked
		}
		return acked == 2*n-uint64(victimLeases)
	})
	if n := pending(); n != victimLeases {
		t.Fatalf("%d leases pending before the victim stops, want its %d", n, victimLeases)
	}
	killed := time.Now()
	victim.Close() // no leave: the publishers learn it from gossip
	testutil.WaitFor(t, "every record acknowledged on both publishers", 45*time.Second, func() bool {
		for _, p := range pubs {
			st := p.GroupStats()["jobs/workers"]
			if st.Acked != n || st.Floor != n {
				return false
			}
		}
		return true
	})
	if d := time.Since(killed); d >= time.Minute {
		t.Fatalf("leases came back after %v: AckWait, not gossip", d)
	}
	stop()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(processed) != 2*n {
		t.Fatalf("processed %d distinct records, want %d", len(processed), 2*n)
	}
	if len(redelivered) != victimLeases {
		t.Errorf("%d records redelivered, want the victim's %d leases", len(redelivered), victimLeases)
	}
	for k := range held {
		if !redelivered[k] {
			t.Errorf("the victim's record %v was not redelivered", k)
		}
	}
	for k, c := range processed {
		if c != 1 {
			t.Errorf("record %v processed %d times", k, c)
		}
	}
}

// TestGroupAndConsumerCoexist: a plain consumer still gets every record of
// a stream a group consumes, and bad group names are refused.
func TestGroupAndConsumerCoexist(t *testing.T) {
	p := newNode(t, "gco-pub")
	publish(t, p, "mix", 50)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := p.Group(fastmq.GroupConfig{Stream: "mix", Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Consume(fastmq.ConsumerConfig{Stream: "mix", Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 50; i++ {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := msg.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		cm, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.Ack(cm)
	}
	if _, err := p.Group(fastmq.GroupConfig{Stream: "mix", Group: "bad/name"}); err == nil {
		t.Fatal("a bad group name was accepted")
	}
}
