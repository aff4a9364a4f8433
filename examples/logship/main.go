// Command logship is log shipping in one program: a shipper node appends
// lines to its local spool, a collector node on the same mesh finds it by
// gossip, pulls the lines and keeps its place across restarts.
//
//	go run ./examples/logship
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/fastmq/fastmq"
)

func main() {
	dir, err := os.MkdirTemp("", "logship-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// The shipper: every host runs one; its lines stay on its own disk.
	shipper, err := fastmq.New(fastmq.Config{Name: "web-1", DataDir: filepath.Join(dir, "web-1")})
	if err != nil {
		log.Fatal(err)
	}
	defer shipper.Close()
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		line := fmt.Sprintf(`127.0.0.1 - - "GET /item/%d HTTP/1.1" 200 512`, i)
		if _, err := shipper.Publish(ctx, "access-log", []byte(line)); err != nil {
			log.Fatal(err)
		}
	}

	// The collector joins the mesh through the shipper's gossip address and
	// pulls from every publisher of the stream, recording its own offsets.
	collector, err := fastmq.New(fastmq.Config{
		Name:    "collector",
		DataDir: filepath.Join(dir, "collector"),
		Seeds:   []string{shipper.GossipAddr()},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer collector.Close()
	c, err := collector.Consume(fastmq.ConsumerConfig{Stream: "access-log", Name: "archive"})
	if err != nil {
		log.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := 0; i < 5; i++ {
		m, err := c.Next(rctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s@%d: %s\n", m.Publisher, m.Offset, m.Value)
		c.Ack(m) // committed to the collector's offset store in the background and on Close
	}
}
