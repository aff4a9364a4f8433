package rpc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/fastmq/fastmq/discovery/discoverytest"
	"github.com/fastmq/fastmq/patterns/rpc"
)

// A server advertised in a mesh and a client that finds and calls it. The
// in-memory mesh stands in for discovery.Membership.
func Example() {
	mesh := discoverytest.NewMesh()
	defer mesh.Close()
	serverNode, _ := mesh.Join("server-1")
	clientNode, _ := mesh.Join("client")

	srv, err := rpc.NewServer(rpc.ServerConfig{
		Service:   "upper",
		Discovery: serverNode,
		Handler: func(ctx context.Context, req []byte) ([]byte, error) {
			if len(req) == 0 {
				return nil, rpc.Errorf("empty", "nothing to upper-case")
			}
			return bytes.ToUpper(req), nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown(context.Background())

	c, err := rpc.NewClient(rpc.ClientConfig{Service: "upper", Discovery: clientNode})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := c.Call(ctx, []byte("hello"), rpc.CallOptions{Timeout: 2 * time.Second, Idempotent: true, WaitForInstance: true})
	fmt.Println(string(reply), err)

	_, err = c.Call(ctx, nil, rpc.CallOptions{})
	var re *rpc.Error
	if errors.As(err, &re) {
		fmt.Println(re.Code, re.Message, re.Instance)
	}
	// Output:
	// HELLO <nil>
	// empty nothing to upper-case server-1
}

// A call to a service without instances fails at once.
func ExampleClient_Call_noInstance() {
	mesh := discoverytest.NewMesh()
	defer mesh.Close()
	node, _ := mesh.Join("client")
	c, err := rpc.NewClient(rpc.ClientConfig{Service: "nobody", Discovery: node})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	_, err = c.Call(context.Background(), []byte("x"), rpc.CallOptions{})
	fmt.Println(errors.Is(err, rpc.ErrNoInstance))
	fmt.Println(err)
	// Output:
	// true
	// rpc: call "nobody": rpc: no instance of the service
}
