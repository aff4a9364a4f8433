package rpc

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// pickLocked: least outstanding of two random choices, connected first,
// RTT as the tie-break; ejected instances wait ProbeAfter, then get one
// probe at a time; every instance tried means errAllTried.
func TestRPCPick(t *testing.T) {
	c := &Client{cfg: ClientConfig{ProbeAfter: time.Second}, insts: map[string]*instance{}}
	near := &instance{node: "near", connected: true, rtt: time.Millisecond}
	far := &instance{node: "far", connected: true, rtt: 50 * time.Millisecond}
	c.insts["near"], c.insts["far"] = near, far
	now := time.Now()
	for range 20 {
		got, err := c.pickLocked(nil, now)
		if err != nil || got != near {
			t.Fatalf("equal load: picked %v, %v; want the nearer", got, err)
		}
		got.outstanding--
	}
	near.outstanding = 2
	if got, _ := c.pickLocked(nil, now); got != far {
		t.Fatalf("picked %s, want the less loaded", got.node)
	}
	far.outstanding = 0
	far.connected = false
	if got, _ := c.pickLocked(nil, now); got != near {
		t.Fatalf("picked %s, want the connected one", got.node)
	}
	far.connected = true
	if _, err := c.pickLocked([]*instance{near, far}, now); !errors.Is(err, errAllTried) {
		t.Fatalf("all tried: %v", err)
	}

	near.outstanding, far.outstanding = 0, 0
	far.state, far.ejectedAt = ejected, now
	for range 20 {
		got, _ := c.pickLocked(nil, now)
		if got != near {
			t.Fatal("an ejected instance got traffic")
		}
		got.outstanding--
	}
	later := now.Add(time.Second)
	near.outstanding = 100 // so that the probe wins the choice
	probe, _ := c.pickLocked(nil, later)
	if probe != far || far.state != halfOpen || !far.probing {
		t.Fatalf("after ProbeAfter: picked %s (state %v, probing %v), want a probe of far", probe.node, far.state, far.probing)
	}
	if got, _ := c.pickLocked(nil, later); got != near {
		t.Fatal("a second probe went out while one was in flight")
	}
	c.finishLocked(far, outcomeOK, time.Millisecond, later)
	if far.state != healthy || far.probing {
		t.Fatalf("a successful probe left far %v", far.state)
	}

	if _, err := (&Client{insts: map[string]*instance{}}).pickLocked(nil, now); !errors.Is(err, ErrNoInstance) {
		t.Fatalf("no instance: %v", err)
	}
}

// Instances apart by gossip RTTs of one network (microseconds) and
// similar latencies are equals: a caller with nothing outstanding
// spreads its calls over them, rather than sending every call to the
// one a little nearer. A clearly slower one gets none.
func TestRPCPickSpreadsOverEquals(t *testing.T) {
	c := &Client{insts: map[string]*instance{}}
	a := &instance{node: "a", connected: true, rtt: 90 * time.Microsecond, ewma: 400 * time.Microsecond}
	b := &instance{node: "b", connected: true, rtt: 300 * time.Microsecond, ewma: 450 * time.Microsecond}
	c.insts["a"], c.insts["b"] = a, b
	picks := map[*instance]int{}
	for range 400 {
		got, err := c.pickLocked(nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		picks[got]++
		got.outstanding-- // one call at a time
	}
	if picks[a] < 100 || picks[b] < 100 {
		t.Fatalf("equals got %d and %d of 400 calls", picks[a], picks[b])
	}
	b.ewma = 5 * time.Millisecond // clearly slower
	for range 100 {
		got, _ := c.pickLocked(nil, time.Now())
		if got != a {
			t.Fatal("the clearly slower instance got a call with the loads equal")
		}
		got.outstanding--
	}
}

// pruneDepartedLocked keeps the maxDeparted newest departed instances
// of the last departedFor, whole.
func TestRPCPruneDeparted(t *testing.T) {
	c := &Client{}
	now := time.Now()
	c.departed = append(c.departed, departed{InstanceStats: InstanceStats{Node: "old"}, at: now.Add(-departedFor)})
	for i := range maxDeparted + 4 {
		c.departed = append(c.departed, departed{InstanceStats: InstanceStats{Node: fmt.Sprint(i), Calls: uint64(i)}, at: now})
	}
	c.pruneDepartedLocked(now)
	if len(c.departed) != maxDeparted {
		t.Fatalf("%d kept, want %d", len(c.departed), maxDeparted)
	}
	for j, d := range c.departed {
		if i := j + 4; d.Node != fmt.Sprint(i) || d.Calls != uint64(i) {
			t.Fatalf("kept[%d] = %+v, want instance %d whole", j, d.InstanceStats, i)
		}
	}
}
