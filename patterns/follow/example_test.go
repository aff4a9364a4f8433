package follow_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/discovery/discoverytest"
	"github.com/fastmq/fastmq/patterns/follow"
	"github.com/fastmq/fastmq/socket"
)

// A PUSH socket follows the workers of a service: it reaches the one
// worker as soon as discovery reports it. Here discovery is the in-memory
// mesh of discoverytest; with a Node it is node.Membership().
func Example() {
	mesh := discoverytest.NewMesh()
	defer mesh.Close()
	worker, _ := mesh.Join("worker")
	client, _ := mesh.Join("client")

	pull, _ := socket.New(socket.Pull, socket.Config{})
	defer pull.Close()
	ep, _ := pull.Bind("tcp://127.0.0.1:0")
	worker.Advertise(discovery.Service{Name: "work", Kind: "PULL", Endpoints: []string{ep}})

	push, _ := socket.New(socket.Push, socket.Config{})
	defer push.Close()
	f, err := follow.New(follow.Config{Socket: push, Service: "work", Discovery: client})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	go f.Run(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	push.Send(ctx, socket.NewMsgString("job 1")) // waits for the worker
	m, err := pull.Recv(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("worker got %q\n", m.Frames[0])
	// Output: worker got "job 1"
}
