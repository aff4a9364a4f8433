package fastmq_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

func newNode(t *testing.T, name string, seeds ...string) *fastmq.Node {
	t.Helper()
	n, err := fastmq.New(fastmq.Config{Name: name, DataDir: filepath.Join(t.TempDir(), name), Seeds: seeds})
	if err != nil {
		t.Fatalf("start node %s: %v", name, err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func publish(t *testing.T, n *fastmq.Node, stream string, count int) {
	t.Helper()
	for i := 0; i < count; i++ {
		if _, err := n.Publish(context.Background(), stream, []byte(fmt.Sprintf("%s:%d", n.Name(), i))); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMeshPublishersConsumers runs 3 publishers and 2 independent consumers
// that find them by gossip: each consumer gets every record exactly once, in
// per-publisher order; a publisher that joins later is picked up.
func TestMeshPublishersConsumers(t *testing.T) {
	seed := newNode(t, "pub-0")
	pubs := []*fastmq.Node{seed, newNode(t, "pub-1", seed.GossipAddr()), newNode(t, "pub-2", seed.GossipAddr())}
	for _, p := range pubs {
		publish(t, p, "events", 200)
	}
	type got map[string]int
	var consumers []*fastmq.Node
	for i := 0; i < 2; i++ {
		consumers = append(consumers, newNode(t, fmt.Sprintf("cons-%d", i), seed.GossipAddr()))
	}
	read := func(n *fastmq.Node, name string, want map[string]int) {
		t.Helper()
		c, err := n.Consume(fastmq.ConsumerConfig{Stream: "events", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		next := got{}
		total := 0
		for _, w := range want {
			total += w
		}
		for i := 0; i < total; i++ {
			m, err := c.Next(ctx)
			if err != nil {
				t.Fatalf("%s: %v after %v", name, err, next)
			}
			if want := fmt.Sprintf("%s:%d", m.Publisher, m.Offset); string(m.Value) != want || int(m.Offset) != next[m.Publisher] {
				t.Fatalf("%s: got %q at %s@%d, expected offset %d", name, m.Value, m.Publisher, m.Offset, next[m.Publisher])
			}
			next[m.Publisher]++
			c.Ack(m)
		}
		for p, w := range want {
			if next[p] != w {
				t.Fatalf("%s: %d records from %s, want %d", name, next[p], p, w)
			}
		}
	}
	want := map[string]int{"pub-0": 200, "pub-1": 200, "pub-2": 200}
	read(consumers[0], "alpha", want)
	read(consumers[1], "beta", want)

	// A new publisher appears; a running consumer picks it up.
	c, err := consumers[0].Consume(fastmq.ConsumerConfig{Stream: "events", Name: "gamma"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	late := newNode(t, "pub-late", seed.GossipAddr())
	publish(t, late, "events", 10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fromLate := 0
	for fromLate < 10 {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for the late publisher: %v", err)
		}
		if m.Publisher == "pub-late" {
			fromLate++
		}
	}
}

// TestConsumerResumesAcrossNodeRestart checks that committed offsets
// survive a restart of the consumer's node.
func TestConsumerResumesAcrossNodeRestart(t *testing.T) {
	pub := newNode(t, "pub")
	publish(t, pub, "s", 100)
	dir := t.TempDir()
	start := func() *fastmq.Node {
		n, err := fastmq.New(fastmq.Config{Name: "cons", DataDir: dir, Seeds: []string{pub.GossipAddr()}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := start()
	c, err := n.Consume(fastmq.ConsumerConfig{Stream: "s", Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.Ack(m)
	}
	if err := n.Close(); err != nil { // commits what was acknowledged
		t.Fatal(err)
	}
	n = start()
	defer n.Close()
	c, err = n.Consume(fastmq.ConsumerConfig{Stream: "s", Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Offset != 40 {
		t.Fatalf("resumed at %d, want 40", m.Offset)
	}
}

// TestDialFollowsGossip checks that a socket from Dial connects to every
// instance of a service as it is advertised.
func TestDialFollowsGossip(t *testing.T) {
	a := newNode(t, "a")
	b := newNode(t, "b", a.GossipAddr())
	c := newNode(t, "c", a.GossipAddr())
	var workers []*socket.Socket
	for _, n := range []*fastmq.Node{b, c} {
		s, err := n.Serve(socket.Pull, "jobs", "tcp://127.0.0.1:0", socket.Config{})
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, s)
	}
	push, err := a.Dial(socket.Push, "jobs", socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Both workers get work once both are discovered: keep sending until
	// each has received something (bounded by ctx).
	got := make([]int, len(workers))
	for i := 0; got[0] == 0 || got[1] == 0; i++ {
		if err := push.Send(ctx, socket.NewMsg([]byte(fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
		for w, s := range workers {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Millisecond)
			if _, err := s.Recv(rctx); err == nil {
				got[w]++
			}
			rcancel()
		}
		if ctx.Err() != nil {
			t.Fatalf("work reached %v workers", got)
		}
	}
}

func TestNodeRejectsBadInput(t *testing.T) {
	if _, err := fastmq.New(fastmq.Config{DataDir: t.TempDir()}); err == nil {
		t.Fatal("a node without a name started")
	}
	n := newNode(t, "n")
	for _, bad := range []string{"", "../etc", ".hidden", "a/b", strings.Repeat("x", 129)} {
		if _, err := n.Stream(bad); !errors.Is(err, fastmq.ErrBadStreamName) {
			t.Fatalf("stream %q: got %v, want ErrBadStreamName", bad, err)
		}
	}
	if _, err := n.Publish(context.Background(), "open", []byte("x")); err != nil {
		t.Fatal(err)
	}
	c, err := n.Consume(fastmq.ConsumerConfig{Stream: "open", Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Consume(fastmq.ConsumerConfig{Stream: "open", Name: "c"}); !errors.Is(err, fastmq.ErrConsumerExists) {
		t.Fatalf("second live consumer with the same name: %v", err)
	}
	c.Close()
	_, err = n.Consume(fastmq.ConsumerConfig{Stream: "open", Name: "c"}) // the name is free again
	if err != nil {
		t.Fatal(err)
	}
	if st := n.Status(); len(st.Consumers) != 1 {
		t.Fatalf("status lists %d consumers, want 1", len(st.Consumers))
	}
	n.Close()
	for _, s := range []string{"open", "new"} {
		if _, err := n.Publish(context.Background(), s, []byte("x")); !errors.Is(err, fastmq.ErrClosed) {
			t.Fatalf("publish to %q after close: %v", s, err)
		}
	}
}

func TestMetricsAndStatus(t *testing.T) {
	n := newNode(t, "m")
	publish(t, n, "s", 5)
	srv := httptest.NewServer(nodeHTTP(n))
	defer srv.Close()
	for path, want := range map[string]string{
		"/metrics": `fastmq_stream_next_offset{stream="s"} 5`,
		"/status":  `"name": "m"`,
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), want) {
			t.Fatalf("%s lacks %q:\n%s", path, want, b)
		}
	}
}

// TestConcurrentConsumeStartsOne proves that a name and stream start exactly
// one consumer however many Consume calls race for it, while calls for other
// names start at the same time: every other call gets ErrConsumerExists.
func TestConcurrentConsumeStartsOne(t *testing.T) {
	n := newNode(t, "race")
	const names, callers = 4, 8 // 32 concurrent calls, 8 per name
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		started = map[string]int{}
		others  []error
	)
	for i := 0; i < names*callers; i++ {
		name := fmt.Sprintf("c%d", i%names)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := n.Consume(fastmq.ConsumerConfig{Stream: "s", Name: name})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				started[name]++
			case !errors.Is(err, fastmq.ErrConsumerExists):
				others = append(others, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(others) > 0 {
		t.Fatalf("Consume failed otherwise than ErrConsumerExists: %v", others)
	}
	for i := 0; i < names; i++ {
		if name := fmt.Sprintf("c%d", i); started[name] != 1 {
			t.Errorf("consumer %q started %d times, want once", name, started[name])
		}
	}
	if st := n.Status(); len(st.Consumers) != names {
		t.Errorf("status lists %d consumers, want %d", len(st.Consumers), names)
	}
}

// TestConsumePullConfig checks what the node sets in ConsumerConfig.Pull:
// Stream and Name come from the outer fields (setting them in Pull is
// refused: TestConsumeRefusesNodeFields), and a caller's OnClose runs
// before the node frees the name.
func TestConsumePullConfig(t *testing.T) {
	n := newNode(t, "pc")
	publish(t, n, "s", 3)
	closed := make(chan bool, 1)
	c, err := n.Consume(fastmq.ConsumerConfig{Stream: "s", Name: "c", Pull: pull.ConsumerConfig{
		Start: spool.Latest(),
		OnClose: func() {
			_, err := n.Consume(fastmq.ConsumerConfig{Stream: "s", Name: "c"})
			closed <- errors.Is(err, fastmq.ErrConsumerExists)
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Stream() != "s" {
		t.Fatalf("consumer of %q, want the outer Stream %q", c.Stream(), "s")
	}
	c.Close()
	if !<-closed {
		t.Fatal("the name was free while the caller's OnClose ran")
	}
	if st := n.Status(); len(st.Consumers) != 0 {
		t.Fatalf("status lists %d consumers after Close, want 0", len(st.Consumers))
	}
}

// TestShutdownBoundedByContext proves Node.Shutdown stops a socket's linger
// when its context ends: a PUSH socket with a day's linger and messages
// queued for a peer that never reads used to hold Shutdown for the whole
// linger.
func TestShutdownBoundedByContext(t *testing.T) {
	n, err := fastmq.New(fastmq.Config{Name: "n", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	push, err := n.Serve(socket.Push, "work", "tcp://127.0.0.1:0", socket.Config{Linger: 24 * time.Hour, SendHWM: 16})
	if err != nil {
		t.Fatal(err)
	}
	pull, err := socket.New(socket.Pull, socket.Config{RecvHWM: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pull.Close()
	insts := n.Membership().Lookup("work")
	if len(insts) != 1 {
		t.Fatalf("advertised instances of work: %+v", insts)
	}
	if err := pull.Connect(insts[0].Service.Endpoints[0]); err != nil {
		t.Fatal(err)
	}
	// Fill the PULL's queue, the connection and the PUSH's queue.
	body := make([]byte, 256<<10)
	for sent := 0; ; sent++ {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := push.Send(ctx, socket.NewMsg(body))
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && sent > 0 {
			break
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		if sent > 10000 {
			t.Fatal("the PUSH never filled up")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.Shutdown(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown = %v, want it to report the context's deadline", err)
		}
	case <-time.After(30 * time.Second): // a watchdog, not a measurement
		t.Fatal("Shutdown is still lingering long after its context ended")
	}
}
