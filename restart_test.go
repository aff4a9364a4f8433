package fastmq_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// TestRestartServesStreamsAtOnce proves a restarted publisher answers the
// first fetch of a consumer that kept knocking on its spool port with
// records: the streams on disk are open before the port is, so no fetch
// gets "unknown stream" (which costs the consumer a back-off).
func TestRestartServesStreamsAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep := "tcp://" + ln.Addr().String()
	ln.Close()
	cfg := fastmq.Config{Name: "pub", DataDir: t.TempDir(), SpoolEndpoints: []string{ep}}
	pub, err := fastmq.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Other streams on disk, opened before "s" at start.
	for i := range 20 {
		publish(t, pub, fmt.Sprintf("a%02d", i), 1)
	}
	publish(t, pub, "s", 1)
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}

	// The consumer knocks on the stopped publisher's port every few ms.
	c, err := pull.NewConsumer(pull.ConsumerConfig{
		Stream: "s", Name: "reader", Start: spool.Earliest(),
		Publishers: map[string]string{"pub": ep},
		Socket:     socket.Config{ReconnectInterval: time.Millisecond, ReconnectIntervalMax: 2 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pub, err = fastmq.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Value) != "pub:0" {
		t.Fatalf("got %q, want pub:0", m.Value)
	}
	if u := pub.Server().Stats().UnknownStreams; u != 0 {
		t.Fatalf("the restarted publisher answered %d fetches with unknown stream", u)
	}
}
