package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/rpc"
)

// Calls reach the server and come back; handler errors arrive typed.
func TestRPCCallAndRemoteError(t *testing.T) {
	mesh := newMesh(t)
	serve(t, mesh, "a", func(ctx context.Context, req []byte) ([]byte, error) {
		switch string(req) {
		case "missing":
			return nil, rpc.Errorf("not-found", "no %s here", req)
		case "plain":
			return nil, errors.New("it broke")
		case "panic":
			panic("boom")
		}
		return append([]byte("re:"), req...), nil
	}, nil)
	c := client(t, mesh, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := c.Call(ctx, []byte("hi"), rpc.CallOptions{})
	if err != nil || string(got) != "re:hi" {
		t.Fatalf("Call = %q, %v", got, err)
	}
	for _, tc := range []struct{ req, code, msg string }{
		{"missing", "not-found", "no missing here"},
		{"plain", "error", "it broke"},
		{"panic", "panic", "boom"},
	} {
		_, err := c.Call(ctx, []byte(tc.req), rpc.CallOptions{})
		var re *rpc.Error
		if !errors.As(err, &re) || !errors.Is(err, rpc.ErrRemote) {
			t.Fatalf("%s: err = %v, want *rpc.Error", tc.req, err)
		}
		if re.Code != tc.code || re.Message != tc.msg || re.Instance != "a" {
			t.Fatalf("%s: got %+v", tc.req, re)
		}
	}
	if st := c.Stats(); st.Calls != 4 || st.Errors != 3 || st.Latency.Count() != 1 {
		t.Fatalf("client stats %+v", st)
	}
}

// With no instance a call fails at once with a clear error; asked to
// wait, it waits for one.
func TestRPCNoInstance(t *testing.T) {
	mesh := newMesh(t)
	c := client(t, mesh, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Call(ctx, []byte("x"), rpc.CallOptions{})
	if !errors.Is(err, rpc.ErrNoInstance) || !strings.Contains(err.Error(), `"svc"`) {
		t.Fatalf("err = %v, want ErrNoInstance naming the service", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("failing took %v", d)
	}
	res := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, []byte("x"), rpc.CallOptions{WaitForInstance: true})
		res <- err
	}()
	serve(t, mesh, "late", echo("late"), nil)
	if err := <-res; err != nil {
		t.Fatalf("waiting call: %v", err)
	}
}

// A request whose deadline passed while it queued is never run.
func TestRPCExpiredNeverRuns(t *testing.T) {
	mesh := newMesh(t)
	release := make(chan struct{})
	var ran sync.Map
	srv := serve(t, mesh, "a", func(ctx context.Context, req []byte) ([]byte, error) {
		ran.Store(string(req), true)
		if string(req) == "block" {
			<-release
		}
		return req, nil
	}, func(c *rpc.ServerConfig) { c.Concurrency = 1 })
	c := client(t, mesh, 1, nil)
	ctx := context.Background()
	blocked := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, []byte("block"), rpc.CallOptions{})
		blocked <- err
	}()
	testutil.WaitFor(t, "the handler busy", 0, func() bool { _, ok := ran.Load("block"); return ok })
	_, err := c.Call(ctx, []byte("late"), rpc.CallOptions{Timeout: 50 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	// The server counts the request's timeout (at most 50 ms) from when it
	// arrived, which may be later than the client's start: the handler is
	// freed once the server has had the request for 50 ms.
	testutil.WaitFor(t, "the late request received", 0, func() bool { return srv.Stats().Requests == 2 })
	received := time.Now()
	testutil.WaitFor(t, "its deadline passed at the server", 0, func() bool { return time.Since(received) > 50*time.Millisecond })
	close(release)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the expired request dropped", 0, func() bool { return srv.Stats().Expired == 1 })
	if _, ok := ran.Load("late"); ok {
		t.Fatal("the expired request ran")
	}
}

// A retried call with an idempotency key runs its handler once and gets
// the cached reply; a call without a key is never sent twice. The relay
// drops the first reply of each, as a lost reply on the network would.
func TestRPCIdempotentRetryRunsOnce(t *testing.T) {
	mesh := newMesh(t)
	var runs sync.Map // request -> *atomic.Int32
	count := func(req string) int32 {
		v, _ := runs.LoadOrStore(req, new(atomic.Int32))
		return v.(*atomic.Int32).Load()
	}
	srv := serve(t, mesh, "a", func(ctx context.Context, req []byte) ([]byte, error) {
		v, _ := runs.LoadOrStore(string(req), new(atomic.Int32))
		n := v.(*atomic.Int32).Add(1)
		return fmt.Appendf(nil, "%s#%d", req, n), nil
	}, func(c *rpc.ServerConfig) { c.Discovery = nil })
	r := newRelay(t, srv.Endpoints()[0])
	relayNode := join(t, mesh, "relay")
	if err := relayNode.Advertise(discovery.Service{Name: "svc", Kind: "ROUTER", Endpoints: []string{r.ep}}); err != nil {
		t.Fatal(err)
	}
	c := client(t, mesh, 1, func(c *rpc.ClientConfig) { c.AttemptTimeout = 100 * time.Millisecond })
	waitConnected(t, c, 1)
	ctx := context.Background()

	for i := range 3 {
		req := fmt.Sprintf("keyed-%d", i)
		r.drop <- struct{}{}
		got, err := c.Call(ctx, []byte(req), rpc.CallOptions{Timeout: 5 * time.Second, IdempotencyKey: req})
		if err != nil || string(got) != req+"#1" {
			t.Fatalf("keyed call: %q, %v; want %s#1", got, err, req)
		}
		if n := count(req); n != 1 {
			t.Fatalf("handler ran %d times for %s", n, req)
		}
	}
	if st := srv.Stats(); st.CacheHits < 3 {
		t.Fatalf("server stats %+v: want the retries answered from the cache", st)
	}

	r.drop <- struct{}{}
	_, err := c.Call(ctx, []byte("unkeyed"), rpc.CallOptions{Timeout: 500 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unkeyed call with a lost reply: %v, want DeadlineExceeded", err)
	}
	if n := count("unkeyed"); n != 1 {
		t.Fatalf("handler ran %d times for the unkeyed call", n)
	}
}

// A slow instance gets fewer calls than a fast one.
func TestRPCSlowInstanceGetsFewerCalls(t *testing.T) {
	mesh := newMesh(t)
	var fast, slow atomic.Int64
	serve(t, mesh, "fast", func(ctx context.Context, req []byte) ([]byte, error) {
		fast.Add(1)
		return req, nil
	}, nil)
	serve(t, mesh, "slow", func(ctx context.Context, req []byte) ([]byte, error) {
		slow.Add(1)
		select {
		case <-time.After(20 * time.Millisecond): // the instance's service time, not synchronisation
		case <-ctx.Done():
		}
		return req, nil
	}, nil)
	c := client(t, mesh, 2, nil)
	waitConnected(t, c, 2)
	fast.Store(0)
	slow.Store(0)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 40 {
				if _, err := c.Call(context.Background(), []byte("x"), rpc.CallOptions{Timeout: 5 * time.Second}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	f, s := fast.Load(), slow.Load()
	t.Logf("fast %d, slow %d", f, s)
	if f < 3*s {
		t.Fatalf("fast instance got %d calls, slow %d: want at least 3x", f, s)
	}
}

// Shutdown withdraws, finishes every accepted call, then closes: no
// accepted call is lost, and calls made meanwhile go to the other instance.
func TestRPCShutdownDrains(t *testing.T) {
	mesh := newMesh(t)
	release := make(chan struct{})
	var started atomic.Int32
	srv := serve(t, mesh, "old", func(ctx context.Context, req []byte) ([]byte, error) {
		started.Add(1)
		<-release
		return []byte("old"), nil
	}, nil)
	c := client(t, mesh, 1, nil)
	const inflight = 5
	res := make(chan error, inflight)
	for range inflight {
		go func() {
			got, err := c.Call(context.Background(), []byte("x"), rpc.CallOptions{Timeout: 10 * time.Second})
			if err == nil && string(got) != "old" {
				err = fmt.Errorf("reply %q", got)
			}
			res <- err
		}()
	}
	testutil.WaitFor(t, "calls running", 0, func() bool { return started.Load() == inflight })
	serve(t, mesh, "new", echo("new"), nil)
	if err := c.WaitForInstances(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- srv.Shutdown(ctx)
	}()
	// While old drains, calls succeed on new.
	testutil.WaitFor(t, "old withdrawn", 0, func() bool { return len(c.Instances()) == 1 })
	for range 5 {
		got, err := c.Call(context.Background(), []byte("x"), rpc.CallOptions{Timeout: 5 * time.Second})
		if err != nil || !strings.HasPrefix(string(got), "new:") {
			t.Fatalf("call during drain: %q, %v", got, err)
		}
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v before its calls finished", err)
	default:
	}
	close(release)
	for range inflight {
		if err := <-res; err != nil {
			t.Fatalf("accepted call lost: %v", err)
		}
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := srv.Shutdown(context.Background()); !errors.Is(err, rpc.ErrClosed) {
		t.Fatalf("second Shutdown: %v", err)
	}
}

// A server closed while it runs requests (its process dies, as far as
// the client can tell: the connection drops and gossip says failed): a
// call with an idempotency key fails over to another instance within its
// deadline, and a call without one fails at once with ErrOutcomeUnknown.
func TestRPCFailoverWhenInstanceDies(t *testing.T) {
	for _, keyed := range []bool{true, false} {
		t.Run(fmt.Sprintf("keyed=%v", keyed), func(t *testing.T) {
			mesh := newMesh(t)
			hang := make(chan struct{})
			defer close(hang)
			var onDoomed atomic.Int32
			doomedNode := join(t, mesh, "doomed")
			doomed, err := rpc.NewServer(rpc.ServerConfig{Service: "svc", Discovery: doomedNode, Handler: func(ctx context.Context, req []byte) ([]byte, error) {
				onDoomed.Add(1)
				select {
				case <-hang:
				case <-ctx.Done():
				}
				return nil, ctx.Err()
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer doomed.Close()
			c := client(t, mesh, 1, nil)
			call := func(ctx context.Context) ([]byte, error) {
				return c.Call(ctx, []byte("x"), rpc.CallOptions{Timeout: 2 * time.Second, Idempotent: keyed})
			}
			res := make(chan error, 1)
			start := time.Now()
			go func() {
				got, err := call(context.Background())
				if err == nil && string(got) != "alive:x" {
					err = fmt.Errorf("reply %q", got)
				}
				res <- err
			}()
			testutil.WaitFor(t, "the call running on the doomed instance", 0, func() bool { return onDoomed.Load() == 1 })
			serve(t, mesh, "alive", echo("alive"), nil)
			if err := c.WaitForInstances(context.Background(), 2); err != nil {
				t.Fatal(err)
			}
			doomed.Close()     // the connection drops...
			doomedNode.Close() // ...and gossip declares the node failed
			err = <-res
			took := time.Since(start)
			if keyed && err != nil {
				t.Fatalf("keyed call after the instance died: %v", err)
			}
			if !keyed && !errors.Is(err, rpc.ErrOutcomeUnknown) {
				t.Fatalf("unkeyed call after the instance died: %v, want ErrOutcomeUnknown", err)
			}
			if took > 2*time.Second {
				t.Fatalf("call took %v, past its deadline", took)
			}
			// Later calls go to the live instance.
			if got, err := call(context.Background()); err != nil || string(got) != "alive:x" {
				t.Fatalf("call after failover: %q, %v", got, err)
			}
		})
	}
}

// An instance that times out again and again is ejected, then probed
// before it gets traffic again.
func TestRPCEjectAndProbe(t *testing.T) {
	mesh := newMesh(t)
	var stall atomic.Bool
	stall.Store(true)
	serve(t, mesh, "flaky", func(ctx context.Context, req []byte) ([]byte, error) {
		if stall.Load() {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return []byte("flaky"), nil
	}, nil)
	serve(t, mesh, "good", echo("good"), nil)
	c := client(t, mesh, 2, func(c *rpc.ClientConfig) {
		c.AttemptTimeout = 30 * time.Millisecond
		c.EjectAfter = 2
		c.ProbeAfter = 200 * time.Millisecond
	})
	ctx := context.Background()
	testutil.WaitFor(t, "flaky ejected", 0, func() bool {
		if _, err := c.Call(ctx, []byte("x"), rpc.CallOptions{Timeout: 2 * time.Second, Idempotent: true}); err != nil {
			t.Fatal(err)
		}
		return c.Stats().Ejections == 1
	})
	state := func(node string) string {
		for _, in := range c.Instances() {
			if in.Node == node {
				return in.State
			}
		}
		return "absent"
	}
	if s := state("flaky"); s != "ejected" {
		t.Fatalf("flaky is %s", s)
	}
	stall.Store(false)
	testutil.WaitFor(t, "flaky healthy again after a probe", 0, func() bool {
		if _, err := c.Call(ctx, []byte("x"), rpc.CallOptions{Timeout: 2 * time.Second, Idempotent: true}); err != nil {
			t.Fatal(err)
		}
		return state("flaky") == "healthy"
	})
}

// An instance slower than the attempt timeout is alive: the late reply
// that completes a call tells so, and its consecutive failures start
// over, so that instances that answer every call, each a little later
// than the attempt timeout, are not ejected one after the other as the
// timeouts of successive calls add up.
func TestRPCLateReplyIsNoFailure(t *testing.T) {
	mesh := newMesh(t)
	slow := func(name string) rpc.Handler {
		return func(ctx context.Context, req []byte) ([]byte, error) {
			time.Sleep(100 * time.Millisecond)
			return []byte(name), nil
		}
	}
	serve(t, mesh, "s1", slow("s1"), nil)
	serve(t, mesh, "s2", slow("s2"), nil)
	c := client(t, mesh, 2, func(cfg *rpc.ClientConfig) {
		cfg.AttemptTimeout = 60 * time.Millisecond // one timeout per call, then the late reply
		cfg.Retries = 10
		cfg.EjectAfter = 3
	})
	ctx := context.Background()
	for i := range 6 {
		if _, err := c.Call(ctx, []byte("x"), rpc.CallOptions{Timeout: 5 * time.Second, Idempotent: true}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	st := c.Stats()
	if st.Retries == 0 {
		t.Fatal("no attempt timed out: the test proves nothing")
	}
	if st.Ejections != 0 {
		t.Fatalf("%d ejections of instances that answered every call (%d retries)", st.Ejections, st.Retries)
	}
}

// A Concurrency beyond MaxConcurrency is refused, not a goroutine each and
// a queue four times as long (a billion ran the process out of memory).
func TestRPCServerConcurrencyBound(t *testing.T) {
	_, err := rpc.NewServer(rpc.ServerConfig{Service: "svc", Handler: echo("s"), Concurrency: rpc.MaxConcurrency + 1})
	if err == nil || !strings.Contains(err.Error(), "Concurrency above") {
		t.Fatalf("NewServer: %v", err)
	}
}

// A call that runs out of time says which instance it waited for and
// how long it took, and still matches ctx's error; the instance's stats
// count the timeout.
func TestRPCDeadlineErrorSaysWhere(t *testing.T) {
	mesh := newMesh(t)
	serve(t, mesh, "s1", func(ctx context.Context, req []byte) ([]byte, error) {
		time.Sleep(400 * time.Millisecond) // past the caller's deadline, whatever ctx says
		return nil, nil
	}, nil)
	c := client(t, mesh, 1, nil)
	_, err := c.Call(context.Background(), []byte("x"), rpc.CallOptions{Timeout: 100 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no reply from s1") || !strings.Contains(err.Error(), ", after ") {
		t.Fatalf("error %q", err)
	}
	// The instance's stats count it as a timeout, not as a failure.
	if in := c.Stats().Instances; len(in) != 1 || in[0].Timeouts != 1 || in[0].Failures != 0 {
		t.Fatalf("instance stats %+v, want one timeout and no failure", in)
	}
}

// An instance that goes stays in Stats for a while, as "gone", with the
// counts it had: the failures that made calls fail over remain to be seen
// in /status. Instances lists only those that get calls.
func TestRPCGoneInstanceStaysInStats(t *testing.T) {
	mesh := newMesh(t)
	serve(t, mesh, "s1", echo("s1"), nil)
	s2 := serve(t, mesh, "s2", echo("s2"), nil)
	c := client(t, mesh, 2, nil)
	ctx := context.Background()
	calls := map[string]int{}
	for i := 0; calls["s2"] == 0; i++ {
		if i > 1000 {
			t.Fatal("no call reached s2")
		}
		b, err := c.Call(ctx, []byte("x"), rpc.CallOptions{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		calls[strings.SplitN(string(b), ":", 2)[0]]++
	}
	if err := s2.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "s2 seen gone", 10*time.Second, func() bool {
		for _, in := range c.Stats().Instances {
			if in.Node == "s2" {
				return in.State == "gone" && in.Calls >= uint64(calls["s2"])
			}
		}
		return false
	})
	if ins := c.Instances(); len(ins) != 1 || ins[0].Node != "s1" {
		t.Fatalf("Instances: %+v, want s1 alone", ins)
	}
}
