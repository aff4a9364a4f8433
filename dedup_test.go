package fastmq_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/spool"
)

// TestPublishIdempotentAcrossRestart: a publish retried with the same
// message id, or the same producer sequence, after the publisher node
// restarted appends nothing and returns the first offset.
func TestPublishIdempotentAcrossRestart(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "pub")
	start := func() *fastmq.Node {
		n, err := fastmq.New(fastmq.Config{Name: "pub", DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := start()
	if off, err := n.Publish(ctx, "s", []byte("a"), spool.MsgID("id-a")); err != nil || off != 0 {
		t.Fatalf("publish: %d %v", off, err)
	}
	a, err := n.PublishAsync(ctx, "s", []byte("b"), spool.ProducerSeq("prod", 1))
	if err != nil {
		t.Fatal(err)
	}
	if off, err := a.Wait(ctx); err != nil || off != 1 {
		t.Fatalf("publish async: %d %v", off, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = start()
	defer n.Close()
	off, err := n.Publish(ctx, "s", []byte("a"), spool.MsgID("id-a"))
	if !errors.Is(err, spool.ErrDuplicate) || off != 0 {
		t.Fatalf("retried id after restart: %d %v", off, err)
	}
	off, err = n.Publish(ctx, "s", []byte("b"), spool.ProducerSeq("prod", 1))
	if !errors.Is(err, spool.ErrDuplicate) || off != 1 {
		t.Fatalf("retried sequence after restart: %d %v", off, err)
	}
	if _, err := n.Publish(ctx, "s", []byte("d"), spool.ProducerSeq("prod", 3)); !errors.Is(err, spool.ErrSequence) {
		t.Fatalf("gap after restart: %v", err)
	}
	l, _ := n.Stream("s")
	if l.NextOffset() != 2 {
		t.Fatalf("retries appended: next %d", l.NextOffset())
	}
}
