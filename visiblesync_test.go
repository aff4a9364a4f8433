package fastmq_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/spool"
)

// TestVisibleBeforeSyncNode: a node whose streams are visible before their
// fsync delivers every published record to a consumer and to a consumer
// group (whose state follows the log's epochs: see package group).
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
	g, err := n.Group(fastmq.GroupConfig{Stream: "events", Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	seen := map[uint64]bool{}
	for len(seen) < 100 {
		m, err := g.Next(ctx)
		if err != nil {
			t.Fatalf("group, after %d records: %v", len(seen), err)
		}
		if seen[m.Offset] {
			t.Fatalf("group: offset %d delivered twice", m.Offset)
		}
		seen[m.Offset] = true
		if err := m.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
