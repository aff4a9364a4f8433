package spool_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/fastmq/fastmq/spool"
)

// With VisibleBeforeSync a reader gets a record as soon as the writer has
// written it, while its Ack completes only after the group commit's fsync.
func ExampleConfig_visibleBeforeSync() {
	dir, _ := os.MkdirTemp("", "spool-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	l, err := spool.Open(spool.Config{Dir: dir, VisibleBeforeSync: true})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	r, _ := l.NewReader(0)
	defer r.Close()

	ack, err := l.AppendAsync(ctx, spool.Record{Value: []byte("hello")})
	if err != nil {
		log.Fatal(err)
	}
	rec, err := r.Next(ctx) // may return before the record is durable
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("read:", rec.Offset, string(rec.Value))
	off, err := ack.Wait(ctx) // durable from here on
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("durable:", off)
	// Output:
	// read: 0 hello
	// durable: 0
}
