package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
)

// TestCLIGroupPublisherKill: a publisher (`fastmq publish`, a child
// process) is killed with SIGKILL while a group's members (in this
// process) lease and acknowledge its records, and restarted on the same
// directory. Nothing whose acknowledgement was confirmed before the kill
// is delivered again; the records delivered twice are at most the leases
// in flight at the crash (delivered and not confirmed, plus those leased
// into the members' buffers), counted; every record is delivered and
// acknowledged in the publisher's state in the end.
func TestCLIGroupPublisherKill(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	const total = 3000
	const buffer, workers = 16, 4
	dir := t.TempDir()
	gossip := freePort(t)
	mn, err := fastmq.New(fastmq.Config{Name: "member", DataDir: filepath.Join(dir, "member"), GossipAddr: gossip})
	if err != nil {
		t.Fatal(err)
	}
	defer mn.Close()
	// The restarted publisher takes the same gossip address: gossip then
	// sees the same node come back.
	pubGossip := freePort(t)
	publisher := func() *cliProc {
		return startCLI(t, "publish", "--stream", "jobs", "--name", "pub", "--data", filepath.Join(dir, "pub"),
			"--gossip", pubGossip, "--join", gossip, "--ack")
	}
	pub := publisher()
	for i := 0; i < total; i++ {
		pub.feed(fmt.Sprintf("job-%d", i))
	}
	for i := 0; i < total; i++ {
		pub.line() // durable
	}

	m, err := mn.Group(fastmq.GroupConfig{Stream: "jobs", Group: "g", Member: group.MemberConfig{AckWait: 2 * time.Minute, Buffer: buffer}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	killed := false
	deliveries := map[uint64]int{}       // Next returned the record this many times
	confirmed := map[uint64]bool{}       // its ack was confirmed
	afterKill := map[uint64]bool{}       // delivered after the kill
	confirmedAtKill := map[uint64]bool{} // copied at the kill
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				msg, err := m.Next(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				deliveries[msg.Offset]++
				if killed {
					afterKill[msg.Offset] = true
				}
				mu.Unlock()
				actx, acancel := context.WithTimeout(ctx, 5*time.Second)
				err = msg.Ack(actx)
				acancel()
				if err == nil {
					mu.Lock()
					confirmed[msg.Offset] = true
					mu.Unlock()
				} else if ctx.Err() != nil {
					return
				}
			}
		}()
	}
	acked := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(confirmed)
	}
	testutil.WaitFor(t, "a third acknowledged", 60*time.Second, func() bool { return acked() >= total/3 })
	pub.kill9()
	mu.Lock()
	killed = true
	unconfirmed := 0
	for o := range deliveries {
		if !confirmed[o] {
			unconfirmed++
		}
	}
	for o := range confirmed {
		confirmedAtKill[o] = true
	}
	mu.Unlock()

	pub = publisher() // restarted on the same directory
	defer func() {    // before the member node closes
		if !t.Failed() {
			return
		}
		// What the member and the publisher saw, to tell why.
		t.Logf("%d acknowledged; the member's view of the mesh: %+v", acked(), mn.Membership().Members())
		for _, in := range mn.Membership().LookupStream("jobs") {
			ictx, icancel := context.WithTimeout(context.Background(), 5*time.Second)
			st, err := group.Info(ictx, in.Service.Endpoints[0], "jobs", "g", fastmq.Config{}.Socket)
			icancel()
			t.Logf("the publisher's state at %s: %+v %v", in.Service.Endpoints[0], st, err)
		}
		t.Logf("the restarted publisher's log:\n%s", pub.stderr())
		mu.Lock()
		defer mu.Unlock()
		var missing []uint64
		for o := uint64(0); o < total && len(missing) < 20; o++ {
			if !confirmed[o] {
				missing = append(missing, o)
			}
		}
		t.Logf("not confirmed: %v", missing)
	}()
	// Every record settled in the restarted publisher's state. (An ack
	// written just before the kill whose reply the kill cut is settled
	// there without a confirmation: the member is never given the record
	// again, as the crash rule says.)
	var st group.GroupStats
	testutil.WaitFor(t, "every record acknowledged in the publisher's state", 90*time.Second, func() bool {
		ins := mn.Membership().LookupStream("jobs")
		if len(ins) == 0 {
			return false
		}
		ictx, icancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer icancel()
		st, err = group.Info(ictx, ins[0].Service.Endpoints[0], "jobs", "g", fastmq.Config{}.Socket)
		return err == nil && st.Floor == total && st.Pending == 0
	})
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	twice := 0
	for o, n := range deliveries {
		if n > 1 {
			twice++
		}
		if afterKill[o] && confirmedAtKill[o] {
			t.Errorf("offset %d was acknowledged (confirmed) before the kill and delivered again after it", o)
		}
	}
	if len(deliveries) != total {
		t.Fatalf("%d records delivered, want every one of the %d", len(deliveries), total)
	}
	if bound := unconfirmed + buffer; twice > bound {
		t.Fatalf("%d records delivered twice, more than the %d leases in flight at the crash (%d delivered and not confirmed, up to %d buffered)",
			twice, bound, unconfirmed, buffer)
	}
	t.Logf("killed after %d confirmed acks; %d delivered and not confirmed at the kill (+ up to %d buffered); %d delivered twice; the restarted publisher redelivered %d",
		len(confirmedAtKill), unconfirmed, buffer, twice, st.Redelivered)
}
