// Command rpc is an RPC service found by gossip: two server nodes handle
// the service "upper"; a client node calls it, and its calls spread over
// both instances. Then one server drains (Shutdown: it withdraws the
// service, finishes what it accepted, closes) and the calls go on to the
// other, none lost.
//
//	go run ./examples/rpc
package main

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/rpc"
)

func main() {
	dir, err := os.MkdirTemp("", "rpc-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var seeds []string
	var servers []*rpc.Server
	for _, name := range []string{"server-1", "server-2"} {
		n, err := fastmq.New(fastmq.Config{Name: name, DataDir: filepath.Join(dir, name), Seeds: seeds})
		if err != nil {
			log.Fatal(err)
		}
		defer n.Close()
		seeds = append(seeds, n.GossipAddr())
		srv, err := n.Handle("upper", func(ctx context.Context, req []byte) ([]byte, error) {
			return append([]byte(name+": "), bytes.ToUpper(req)...), nil
		}, fastmq.HandleOptions{})
		if err != nil {
			log.Fatal(err)
		}
		servers = append(servers, srv)
	}

	client, err := fastmq.New(fastmq.Config{Name: "client", DataDir: filepath.Join(dir, "client"), Seeds: seeds})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	// Wait until gossip has shown both instances, so the calls spread.
	c, err := client.RPCClient("upper")
	if err != nil {
		log.Fatal(err)
	}
	if err := c.WaitForInstances(ctx, 2); err != nil {
		log.Fatal(err)
	}
	call := func(word string) {
		// Idempotent: retried on the other instance if this one dies.
		reply, err := client.Call(ctx, "upper", []byte(word), rpc.CallOptions{Timeout: 2 * time.Second, Idempotent: true, WaitForInstance: true})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(reply))
	}
	for _, word := range []string{"alpha", "beta", "gamma", "delta"} {
		call(word)
	}

	if err := servers[0].Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("server-1 drained")
	for _, word := range []string{"epsilon", "zeta"} {
		call(word)
	}
}
