package fastmq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/spool"
)

// A publish retried with the same message id is stored once: the retry
// returns the first offset and spool.ErrDuplicate.
func ExampleNode_Publish_idempotent() {
	dir, _ := os.MkdirTemp("", "fastmq-dedup-example-")
	defer os.RemoveAll(dir)
	node, err := fastmq.New(fastmq.Config{Name: "host-1", DataDir: filepath.Join(dir, "host-1")})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()

	ctx := context.Background()
	for i := 0; i < 2; i++ {
		off, err := node.Publish(ctx, "payments", []byte("paid 42"), spool.MsgID("payment-42"))
		switch {
		case errors.Is(err, spool.ErrDuplicate):
			fmt.Println("already stored at offset", off)
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Println("stored at offset", off)
		}
	}
	// Output:
	// stored at offset 0
	// already stored at offset 0
}
