package discoverytest

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fastmq/fastmq/discovery"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func next(t *testing.T, ch <-chan discovery.Event) discovery.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("channel closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	return discovery.Event{}
}

func TestFakeLifecycle(t *testing.T) {
	ms := NewMesh()
	defer ms.Close()
	a, _ := ms.Join("a")
	b, _ := ms.Join("b")
	c, _ := ms.Join("c")
	if _, err := ms.Join("a"); err == nil {
		t.Fatal("duplicate alive name accepted")
	}
	if err := b.Advertise(discovery.Service{Name: "api", Kind: "ROUTER", Endpoints: []string{"tcp://b:1"}}); err != nil {
		t.Fatal(err)
	}
	ch, err := a.Watch(t.Context(), "api")
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, ch); ev.Type != discovery.Added || ev.Instance.Node != "b" {
		t.Fatalf("%+v", ev)
	}
	_ = b.Advertise(discovery.Service{Name: "api", Kind: "ROUTER", Endpoints: []string{"tcp://b:2"}})
	if ev := next(t, ch); ev.Type != discovery.Updated || ev.Instance.Service.Endpoints[0] != "tcp://b:2" {
		t.Fatalf("%+v", ev)
	}
	_ = c.Advertise(discovery.Service{Name: "api", Kind: "ROUTER", Endpoints: []string{"tcp://c:1"}})
	next(t, ch)
	_ = b.Withdraw("api")
	if ev := next(t, ch); ev.Type != discovery.Removed || ev.Reason != discovery.ReasonWithdrawn {
		t.Fatalf("%+v", ev)
	}
	_ = c.Close()
	if ev := next(t, ch); ev.Type != discovery.Removed || ev.Reason != discovery.ReasonFailed {
		t.Fatalf("%+v", ev)
	}
	_ = b.AdvertiseSpool("tcp://b:9", []string{"s"})
	if got := a.LookupStream("s"); len(got) != 1 || got[0].Service.Kind != discovery.SpoolKind {
		t.Fatalf("%+v", got)
	}
	sch, _ := a.WatchStream(t.Context(), "s")
	next(t, sch)
	_ = b.Leave(context.Background())
	if ev := next(t, sch); ev.Type != discovery.Removed || ev.Reason != discovery.ReasonLeft {
		t.Fatalf("%+v", ev)
	}
	if err := b.Advertise(discovery.Service{Name: "x", Kind: "REP", Endpoints: []string{"e"}}); !errors.Is(err, discovery.ErrClosed) {
		t.Fatalf("after leave: %v", err)
	}
	// Restart under the same name.
	b2, err := ms.Join("b")
	if err != nil {
		t.Fatal(err)
	}
	_ = b2.AdvertiseSpool("tcp://b:10", []string{"s"})
	if ev := next(t, sch); ev.Type != discovery.Added || ev.Instance.Service.Endpoints[0] != "tcp://b:10" {
		t.Fatalf("%+v", ev)
	}
	// The watcher's own node closing ends its watches.
	_ = a.Close()
	for range ch {
	}
	if len(b2.Members()) != 3 {
		t.Fatalf("members %+v", b2.Members())
	}
}
