// Command mesh is the cross-host recipe: run it on every host of a TCP mesh.
// Each host runs one node that gossips on --gossip, joins the hosts in
// --join, publishes its own lines on --stream and prints every line published
// by any host (its own included), pulled with its own offsets.
//
// On host A (10.0.0.1) and host B (10.0.0.2):
//
//	key=$(head -c 32 /dev/urandom | base64)   # once, then the same on every host
//	mesh --name a --gossip 10.0.0.1:7946 --spool tcp://10.0.0.1:7950 --data /var/lib/mesh --key $key
//	mesh --name b --gossip 10.0.0.2:7946 --spool tcp://10.0.0.2:7950 --data /var/lib/mesh --key $key --join 10.0.0.1:7946
//
// --key takes a base64 16/24/32-byte key, the same on every host: it
// encrypts the gossip, and gossip on an address that is not loopback needs
// it (or --plaintext, on a trusted network). On one machine, try it with
// loopback addresses and two data directories.
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/fastmq/fastmq"
)

func main() {
	name := flag.String("name", "", "node name, unique in the mesh (required)")
	data := flag.String("data", "", "data directory (required)")
	gossip := flag.String("gossip", "127.0.0.1:7946", "gossip address HOST:PORT")
	spoolEP := flag.String("spool", "tcp://127.0.0.1:0", "spool server endpoint")
	join := flag.String("join", "", "comma-separated gossip addresses to join")
	key := flag.String("key", "", "gossip encryption key (base64)")
	plaintext := flag.Bool("plaintext", false, "allow unencrypted gossip on an address that is not loopback")
	stream := flag.String("stream", "chat", "stream to publish and consume")
	flag.Parse()
	if *name == "" || *data == "" {
		flag.Usage()
		os.Exit(2)
	}
	cfg := fastmq.Config{
		Name: *name, DataDir: *data, GossipAddr: *gossip, SpoolEndpoints: []string{*spoolEP},
		RetryJoin: true, GossipPlaintext: *plaintext, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
	if *join != "" {
		cfg.Seeds = strings.Split(*join, ",")
	}
	if *key != "" {
		k, err := base64.StdEncoding.DecodeString(*key)
		if err != nil {
			log.Fatalf("--key: %v", err)
		}
		cfg.Key = k
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	node, err := fastmq.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	c, err := node.Consume(fastmq.ConsumerConfig{Stream: *stream, Name: "printer"})
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if _, err := node.Publish(ctx, *stream, []byte(sc.Text())); err != nil {
				log.Print(err)
				return
			}
		}
	}()
	for {
		m, err := c.Next(ctx)
		if err != nil {
			break
		}
		fmt.Printf("[%s] %s\n", m.Publisher, m.Value)
		c.Ack(m)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := node.Shutdown(sctx); err != nil {
		log.Print(err)
	}
}
