package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fastmq/fastmq/discovery"
)

// Two nodes on one host: one advertises a service, the other finds it.
func Example() {
	a, err := discovery.New(discovery.Config{NodeName: "a", Profile: discovery.ProfileLocal})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, err := discovery.New(discovery.Config{NodeName: "b", Profile: discovery.ProfileLocal, Seeds: []string{a.GossipAddr()}})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	if err := a.Advertise(discovery.Service{Name: "jobs", Kind: "PULL", Endpoints: []string{"tcp://127.0.0.1:5557"}}); err != nil {
		panic(err)
	}
	// Gossip is eventually consistent: wait (bounded) until b has heard.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if len(b.Lookup("jobs")) > 0 {
			break
		}
	}
	for _, in := range b.Lookup("jobs") {
		fmt.Println(in.Node, in.Service.Kind, in.Service.Endpoints)
	}
	// Output: a PULL [tcp://127.0.0.1:5557]
}

// Watch streams the current instances, then changes, including the local
// node's own advertisements.
func ExampleMembership_Watch() {
	m, err := discovery.New(discovery.Config{NodeName: "solo", Profile: discovery.ProfileLocal})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := m.Watch(ctx, "api")
	if err != nil {
		panic(err)
	}
	_ = m.Advertise(discovery.Service{Name: "api", Kind: "ROUTER", Endpoints: []string{"tcp://127.0.0.1:7000"}})
	ev := <-events
	fmt.Println(ev.Type, ev.Reason, ev.Instance.Node, ev.Instance.Service.Endpoints)
	// Updates are coalesced per instance: had we withdrawn before reading,
	// the watcher would have seen nothing at all.
	_ = m.Withdraw("api")
	ev = <-events
	fmt.Println(ev.Type, ev.Reason, ev.Instance.Node, ev.Instance.Service.Endpoints)
	// Output:
	// added  solo [tcp://127.0.0.1:7000]
	// removed withdrawn solo [tcp://127.0.0.1:7000]
}

// A spool server advertises the streams it serves; consumers look them up.
func ExampleMembership_AdvertiseSpool() {
	m, err := discovery.New(discovery.Config{NodeName: "pub", Profile: discovery.ProfileLocal})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	if err := m.AdvertiseSpool("tcp://127.0.0.1:6000", []string{"access-log", "audit"}); err != nil {
		panic(err)
	}
	for _, in := range m.LookupStream("audit") {
		fmt.Println(in.Node, in.Service.Name, in.Service.Kind, in.Service.Endpoints)
	}
	// Output: pub audit SPOOL [tcp://127.0.0.1:6000]
}

// An advertisement larger than serf's 512-byte tag budget is refused and
// leaves the node's advertisement unchanged.
func ExampleTagsTooLargeError() {
	m, err := discovery.New(discovery.Config{NodeName: "n", Profile: discovery.ProfileLocal})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	eps := strings.Split(strings.Repeat("tcp://192.0.2.1:10000 ", 40), " ")
	err = m.Advertise(discovery.Service{Name: "big", Kind: "PUB", Endpoints: eps[:40]})
	var tl *discovery.TagsTooLargeError
	fmt.Println(errors.Is(err, discovery.ErrTagsTooLarge), errors.As(err, &tl) && tl.Size > tl.Limit, len(m.Lookup("big")))
	// Output: true true 0
}
