package fastmq_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/spool"
)

// A node publishes to its own spool; a consumer anywhere in the mesh (here,
// on the same node) pulls the records with its own offsets.
func Example() {
	dir, _ := os.MkdirTemp("", "fastmq-example-")
	defer os.RemoveAll(dir)

	node, err := fastmq.New(fastmq.Config{Name: "host-1", DataDir: filepath.Join(dir, "host-1")})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()

	ctx := context.Background()
	for _, v := range []string{"first", "second", "third"} {
		off, err := node.Publish(ctx, "events", []byte(v))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("published at offset", off)
	}

	c, err := node.Consume(fastmq.ConsumerConfig{Stream: "events", Name: "reader"})
	if err != nil {
		log.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		m, err := c.Next(rctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s@%d %s\n", m.Publisher, m.Offset, m.Value)
		c.Ack(m)
	}
	// Output:
	// published at offset 0
	// published at offset 1
	// published at offset 2
	// host-1@0 first
	// host-1@1 second
	// host-1@2 third
}

// Two nodes: the second joins the first by its gossip address and consumes
// what the first publishes.
func ExampleNode_Consume() {
	dir, _ := os.MkdirTemp("", "fastmq-example-")
	defer os.RemoveAll(dir)

	pub, err := fastmq.New(fastmq.Config{Name: "shipper", DataDir: filepath.Join(dir, "shipper")})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	if _, err := pub.Publish(context.Background(), "logs", []byte("GET /index.html 200")); err != nil {
		log.Fatal(err)
	}

	col, err := fastmq.New(fastmq.Config{Name: "collector", DataDir: filepath.Join(dir, "collector"), Seeds: []string{pub.GossipAddr()}})
	if err != nil {
		log.Fatal(err)
	}
	defer col.Close()
	c, err := col.Consume(fastmq.ConsumerConfig{Stream: "logs", Name: "archive"})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := c.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("from %s: %s\n", m.Publisher, m.Value)
	c.Ack(m)
	// Output:
	// from shipper: GET /index.html 200
}

// PublishAsync keeps many records in flight: one fsync covers them all,
// and the Acks complete in order, so waiting on the last one is enough.
func ExampleNode_PublishAsync() {
	dir, _ := os.MkdirTemp("", "fastmq-example-")
	defer os.RemoveAll(dir)
	node, err := fastmq.New(fastmq.Config{Name: "host-1", DataDir: filepath.Join(dir, "host-1")})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()

	ctx := context.Background()
	var last *spool.Ack
	for i := 0; i < 1000; i++ {
		if last, err = node.PublishAsync(ctx, "events", []byte(fmt.Sprintf("record %d", i))); err != nil {
			log.Fatal(err)
		}
	}
	off, err := last.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("all 1000 durable; the last at offset", off)
	// Output:
	// all 1000 durable; the last at offset 999
}
