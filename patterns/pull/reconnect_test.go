package pull_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/faultproxy"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// TestFetchSentAgainOnReconnect: a fetch parked at the publisher dies
// with its connection; once the connection is back, the consumer sends it
// again at once instead of waiting MaxWait + RequestTimeout (a minute
// here) for a reply that never comes.
func TestFetchSentAgainOnReconnect(t *testing.T) {
	l := openSpool(t, spool.Config{})
	srv := startServer(t, map[string]*spool.Log{"s": l})
	target := strings.TrimPrefix(srv.Endpoints()[0], "tcp://")
	px, err := faultproxy.New(faultproxy.Config{Listen: "127.0.0.1:0", Target: target})
	if err != nil {
		t.Fatal(err)
	}
	addr := px.Addr()
	t.Cleanup(func() { px.Close() })
	c := startConsumer(t, pull.ConsumerConfig{
		Stream: "s", Publishers: map[string]string{"p": "tcp://" + addr},
		MaxWait: 30 * time.Second, RequestTimeout: 30 * time.Second,
	})
	appendN(t, l, "before", 0, 1)
	if m := next(t, c); string(m.Value) != "before-0" {
		t.Fatalf("got %q", m.Value)
	}
	testutil.WaitFor(t, "a parked fetch", 0, func() bool { return srv.Stats().Parked > 0 })

	// Cut the connection: close the proxy (and the parked fetch's
	// connection with it), then listen again on the same address.
	px.Close()
	px, err = faultproxy.New(faultproxy.Config{Listen: addr, Target: target})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the consumer to reconnect", 0, func() bool { return c.Stats()[0].Reconnects > 0 })
	appendN(t, l, "after", 1, 1)
	if m := next(t, c); string(m.Value) != "after-1" || m.Offset != 1 {
		t.Fatalf("got %q@%d", m.Value, m.Offset)
	}
	if st := c.Stats()[0]; st.Errors != 0 {
		t.Fatalf("errors %d, want 0 (a reconnect is no failed fetch)", st.Errors)
	}
}
