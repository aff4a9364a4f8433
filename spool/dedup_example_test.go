package spool_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/fastmq/fastmq/spool"
)

// A message id makes a retried append a no-op within the window; a
// numbered producer is deduplicated exactly, without a window.
func ExampleMsgID() {
	dir, _ := os.MkdirTemp("", "spool-dedup-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	l, err := spool.Open(spool.Config{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	rec := spool.Record{Value: []byte("order 42 paid"), Headers: []spool.Header{spool.MsgID("order-42")}}
	off, err := l.Append(ctx, rec)
	fmt.Println(off, err)
	off, err = l.Append(ctx, rec) // a retry: nothing is appended
	fmt.Println(off, errors.Is(err, spool.ErrDuplicate))

	for seq := uint64(1); seq <= 2; seq++ {
		off, err = l.Append(ctx, spool.Record{Value: []byte("tick"), Headers: []spool.Header{spool.ProducerSeq("clock-1", seq)}})
		fmt.Println(off, err)
	}
	_, err = l.Append(ctx, spool.Record{Headers: []spool.Header{spool.ProducerSeq("clock-1", 4)}})
	fmt.Println(errors.Is(err, spool.ErrSequence))
	fmt.Println("records:", l.NextOffset())
	// Output:
	// 0 <nil>
	// 0 true
	// 1 <nil>
	// 2 <nil>
	// true
	// records: 3
}
