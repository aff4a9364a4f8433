package fastmq_test

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

// A service in two lines: one node handles "upper", any node calls it.
func ExampleNode_Handle() {
	dir, _ := os.MkdirTemp("", "fastmq-example-")
	defer os.RemoveAll(dir)
	node, err := fastmq.New(fastmq.Config{Name: "host-1", DataDir: filepath.Join(dir, "host-1")})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()

	srv, err := node.Handle("upper", func(ctx context.Context, req []byte) ([]byte, error) {
		return bytes.ToUpper(req), nil
	}, fastmq.HandleOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The advertisement reaches the node's own view through discovery:
	// wait for it rather than fail at once.
	reply, err := node.Call(ctx, "upper", []byte("hello"), rpc.CallOptions{WaitForInstance: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(reply))
	// Output: HELLO
}
