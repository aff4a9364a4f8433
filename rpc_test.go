package fastmq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/rpc"
)

// Three nodes in a real serf mesh: two serve "upper", one calls it with
// steady load; one server node dies (closed without leaving: its sockets
// drop, gossip declares it failed) mid-run. Every call with a 2 s deadline
// and an idempotency key succeeds, and the calls after the death go to the
// live instance.
func TestRPCNodeFailoverOnSerfMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("gossip mesh test")
	}
	a := newNode(t, "a")
	b := newNode(t, "b", a.GossipAddr())
	c := newNode(t, "c", a.GossipAddr())
	var perNode sync.Map // node -> *atomic.Int64
	for _, n := range []*fastmq.Node{a, b} {
		cnt := new(atomic.Int64)
		perNode.Store(n.Name(), cnt)
		if _, err := n.Handle("upper", func(ctx context.Context, req []byte) ([]byte, error) {
			cnt.Add(1)
			return []byte(strings.ToUpper(string(req))), nil
		}, fastmq.HandleOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(name string) int64 { v, _ := perNode.Load(name); return v.(*atomic.Int64).Load() }
	cl, err := c.RPCClient("upper")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.WaitForInstances(wctx, 2); err != nil {
		t.Fatal(err)
	}

	var calls, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 4 {
		wg.Go(func() {
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				req := fmt.Sprintf("w%d-%d", i, j)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				got, err := c.Call(ctx, "upper", []byte(req), rpc.CallOptions{Idempotent: true})
				cancel()
				calls.Add(1)
				if err == nil && string(got) != strings.ToUpper(req) {
					err = fmt.Errorf("reply %q to %q", got, req)
				}
				if err != nil {
					failed.Add(1)
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	testutil.WaitFor(t, "calls on both instances", 0, func() bool { return count("a") > 50 && count("b") > 50 })
	a.Close() // dies: no leave, no drain
	atA := count("a")
	testutil.WaitFor(t, "calls after the death", 0, func() bool { return count("b") > atA+200 })
	testutil.WaitFor(t, "a gone from the client's view", 15*time.Second, func() bool { return len(cl.Instances()) == 1 })
	before := count("b")
	testutil.WaitFor(t, "more calls", 0, func() bool { return count("b") > before+100 })
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("call failed: %v", err)
	}
	t.Logf("%d calls, %d failed; a served %d, b %d", calls.Load(), failed.Load(), count("a"), count("b"))
	if count("a") != atA {
		t.Fatalf("a served calls after it died")
	}
	// b serves; a stays in the status as gone, with the calls it had.
	st := c.RPCStatus().Clients["upper"]
	if st.Calls != uint64(calls.Load()) || st.Errors != uint64(failed.Load()) || len(st.Instances) != 2 ||
		st.Instances[0].Node != "a" || st.Instances[0].State != "gone" || st.Instances[0].Calls < uint64(atA) ||
		st.Instances[1].Node != "b" || st.Instances[1].State != "healthy" {
		t.Fatalf("client status %+v", st)
	}
	if bs := b.RPCStatus().Servers["upper"]; bs.Handled != uint64(count("b")) {
		t.Fatalf("b's server status %+v, want %d handled", bs, count("b"))
	}
}

// A call to a service nobody offers fails at once with ErrNoInstance.
func TestRPCNodeCallNoInstance(t *testing.T) {
	n := newNode(t, "lonely")
	start := time.Now()
	_, err := n.Call(context.Background(), "nobody", []byte("x"), rpc.CallOptions{})
	if !errors.Is(err, rpc.ErrNoInstance) {
		t.Fatalf("err = %v, want ErrNoInstance", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v", d)
	}
	n.Close()
	if _, err := n.Call(context.Background(), "nobody", []byte("x"), rpc.CallOptions{}); !errors.Is(err, fastmq.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// Shutdown of a handled service drains: the calls it accepted finish,
// later calls go to the other node's instance.
func TestRPCNodeHandleShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("gossip mesh test")
	}
	a := newNode(t, "a")
	b := newNode(t, "b", a.GossipAddr())
	release := make(chan struct{})
	started := make(chan struct{}, 8)
	srvA, err := a.Handle("svc", func(ctx context.Context, req []byte) ([]byte, error) {
		started <- struct{}{}
		<-release
		return []byte("a"), nil
	}, fastmq.HandleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := b.RPCClient("svc")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.WaitForInstances(ctx, 1); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 3)
	for range 3 {
		go func() {
			got, err := b.Call(ctx, "svc", []byte("x"), rpc.CallOptions{})
			if err == nil && string(got) != "a" {
				err = fmt.Errorf("reply %q", got)
			}
			res <- err
		}()
	}
	for range 3 {
		<-started
	}
	if _, err := b.Handle("svc", func(ctx context.Context, req []byte) ([]byte, error) { return []byte("b"), nil }, fastmq.HandleOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitForInstances(ctx, 2); err != nil {
		t.Fatal(err)
	}
	shut := make(chan error, 1)
	go func() { shut <- srvA.Shutdown(ctx) }()
	testutil.WaitFor(t, "a withdrawn", 0, func() bool { return len(cl.Instances()) == 1 })
	if got, err := b.Call(ctx, "svc", []byte("x"), rpc.CallOptions{}); err != nil || string(got) != "b" {
		t.Fatalf("call during the drain: %q, %v", got, err)
	}
	close(release)
	for range 3 {
		if err := <-res; err != nil {
			t.Fatalf("accepted call lost: %v", err)
		}
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}
