// Command rpc is an RPC service found by gossip: two server nodes advertise
// the service "upper" with a REP socket; a client node dials the service
// with a DEALER socket that connects to every instance it discovers and
// spreads requests over them.
//
//	go run ./examples/rpc
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/socket"
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
	var servers sync.WaitGroup
	for _, name := range []string{"server-1", "server-2"} {
		n, err := fastmq.New(fastmq.Config{Name: name, DataDir: filepath.Join(dir, name), Seeds: seeds})
		if err != nil {
			log.Fatal(err)
		}
		defer n.Close()
		seeds = append(seeds, n.GossipAddr())
		rep, err := n.Serve(socket.Rep, "upper", "tcp://127.0.0.1:0", socket.Config{})
		if err != nil {
			log.Fatal(err)
		}
		servers.Add(1)
		go func() {
			defer servers.Done()
			for {
				req, err := rep.Recv(ctx)
				if err != nil {
					return // the node closed the socket, or ctx ended
				}
				reply := name + ": " + strings.ToUpper(string(req.Frames[0]))
				if err := rep.Send(ctx, socket.NewMsg([]byte(reply))); err != nil {
					return
				}
			}
		}()
	}

	client, err := fastmq.New(fastmq.Config{Name: "client", DataDir: filepath.Join(dir, "client"), Seeds: seeds})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	// REQ over every discovered instance: requests go round-robin.
	req, err := client.Dial(socket.Req, "upper", socket.Config{})
	if err != nil {
		log.Fatal(err)
	}
	for _, word := range []string{"alpha", "beta", "gamma", "delta"} {
		if err := req.Send(ctx, socket.NewMsg([]byte(word))); err != nil {
			log.Fatal(err)
		}
		rep, err := req.Recv(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(rep.Frames[0]))
	}
	client.Close()
	cancel()
	servers.Wait()
}
