package fastmq_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
)

// A node with a CURVE key pair serves its spools over CURVE and gossips
// its public key; its ACL says who reads what (the node's own key always
// reads its streams). Gossip encrypted with Key makes the keys that
// members advertise trusted; without it, pin them with CurveAllow.
func ExampleNew_curve() {
	dir, _ := os.MkdirTemp("", "fastmq-example-")
	defer os.RemoveAll(dir)

	_, secret, err := socket.NewCurveKeypair() // or CurveKeyFile: a NAME.key from `fastmq keygen --out NAME`
	if err != nil {
		log.Fatal(err)
	}
	acl, err := pull.ParseACL([]byte("fastmq-acl 1\nallow user:ops metrics-*\n"))
	if err != nil {
		log.Fatal(err)
	}
	node, err := fastmq.New(fastmq.Config{
		Name:     "host-1",
		DataDir:  filepath.Join(dir, "host-1"),
		Key:      []byte("0123456789abcdef0123456789abcdef"), // gossip encryption
		CurveKey: secret,
		ACL:      acl,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()

	ctx := context.Background()
	if _, err := node.Publish(ctx, "audit", []byte("who did what")); err != nil {
		log.Fatal(err)
	}
	c, err := node.Consume(fastmq.ConsumerConfig{Stream: "audit", Name: "reader"})
	if err != nil {
		log.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := c.Next(rctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s over CURVE: %s\n", m.Stream, m.Value)
	// Output: audit over CURVE: who did what
}
