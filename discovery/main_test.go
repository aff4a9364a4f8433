package discovery

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild()
		return
	}
	code := m.Run()
	if code == 0 {
		// Close waits for serf's and memberlist's goroutines, but short
		// timer callbacks are not tracked (see doc.go). Wait, bounded, for
		// any of those to end, then require that nothing at all leaked:
		// no goroutine is ignored.
		waitGossipGoroutinesGone(10 * time.Second)
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// gossipGoroutines counts goroutines with a serf or memberlist frame.
func gossipGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/hashicorp/") {
			count++
		}
	}
	return count
}

func waitGossipGoroutinesGone(d time.Duration) {
	deadline := time.Now().Add(d)
	for gossipGoroutines() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

// testLogger discards unless FASTMQ_DEBUG is set. It never logs through t,
// because serf goroutines may still log briefly after a test ends.
func testLogger() *slog.Logger {
	if os.Getenv("FASTMQ_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-node gossip test skipped in -short mode")
	}
}

// newNode starts a ProfileLocal node on 127.0.0.1:0 and closes it at cleanup.
func newNode(t testing.TB, name string, mod func(*Config)) *Membership {
	t.Helper()
	cfg := Config{NodeName: name, Profile: ProfileLocal, Logger: testLogger()}
	if mod != nil {
		mod(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", name, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// cluster starts n nodes all joined to the first.
func cluster(t testing.TB, n int, mod func(*Config)) []*Membership {
	t.Helper()
	nodes := make([]*Membership, n)
	nodes[0] = newNode(t, nodeName(0), mod)
	for i := 1; i < n; i++ {
		seed := nodes[0].GossipAddr()
		nodes[i] = newNode(t, nodeName(i), func(c *Config) {
			if mod != nil {
				mod(c)
			}
			c.Seeds = []string{seed}
		})
	}
	return nodes
}

func nodeName(i int) string { return "node-" + string(rune('a'+i%26)) + itoa(i) }

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func aliveCount(m *Membership) int {
	n := 0
	for _, mem := range m.Members() {
		if mem.Status == StatusAlive {
			n++
		}
	}
	return n
}

func statusOfMember(m *Membership, name string) Status {
	for _, mem := range m.Members() {
		if mem.Name == name {
			return mem.Status
		}
	}
	return StatusUnknown
}

func converged(nodes []*Membership, n int) bool {
	for _, m := range nodes {
		if aliveCount(m) != n {
			return false
		}
	}
	return true
}

// nextEvent reads one event or fails after d.
func nextEvent(t testing.TB, ch <-chan Event, d time.Duration) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return ev
	case <-ctx.Done():
		t.Fatalf("no event within %v", d)
	}
	return Event{}
}

// waitEvent reads events until match returns true.
func waitEvent(t testing.TB, ch <-chan Event, d time.Duration, match func(Event) bool) Event {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("no matching event within %v", d)
		}
		ev := nextEvent(t, ch, left)
		if match(ev) {
			return ev
		}
	}
}

const waitLong = 30 * time.Second
