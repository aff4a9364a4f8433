package fastmq_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/spool"
)

// TestVisibleBeforeSyncNode: a node whose streams are visible before their
// fsync delivers every published record to a consumer, and refuses
// consumer groups, whose state does not follow the log's epochs.
func TestVisibleBeforeSyncNode(t *testing.T) {
	n, err := fastmq.New(fastmq.Config{Name: "early", DataDir: filepath.Join(t.TempDir(), "early"),
		Spool: spool.Config{VisibleBeforeSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	publish(t, n, "events", 100)
	c, err := n.Consume(fastmq.ConsumerConfig{Stream: "events", Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 100; i++ {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if want := fmt.Sprintf("early:%d", i); string(m.Value) != want || int(m.Offset) != i {
			t.Fatalf("got %q at %d, want %q", m.Value, m.Offset, want)
		}
		c.Ack(m)
	}
	if _, err := n.Group(fastmq.GroupConfig{Stream: "events", Group: "g"}); !errors.Is(err, fastmq.ErrGroupsRefused) {
		t.Fatalf("Group: %v, want ErrGroupsRefused", err)
	}
}
