package spool_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/fastmq/fastmq/spool"
)

func Example() {
	dir, _ := os.MkdirTemp("", "spool-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	l, err := spool.Open(spool.Config{Dir: dir, Sync: spool.SyncEach, Codec: spool.CodecZstd})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	first, err := l.Append(ctx, spool.Record{Value: []byte("hello")}, spool.Record{Value: []byte("world")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first offset:", first) // durable: SyncEach fsynced it

	r, _ := l.NewReader(0)
	defer r.Close()
	for i := 0; i < 2; i++ {
		rec, err := r.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(rec.Offset, string(rec.Value))
	}
	// Output:
	// first offset: 0
	// 0 hello
	// 1 world
}

func ExampleLog_ReadRaw() {
	dir, _ := os.MkdirTemp("", "spool-example")
	defer os.RemoveAll(dir)
	l, _ := spool.Open(spool.Config{Dir: dir, Sync: spool.SyncNone, Codec: spool.CodecS2})
	defer l.Close()
	for _, v := range []string{"a", "b", "c"} {
		l.Append(context.Background(), spool.Record{Value: []byte(v)})
	}
	// Whole stored batches, still compressed: what a server sends to a consumer.
	data, next, err := l.ReadRaw(1, 64<<10)
	if err != nil {
		log.Fatal(err)
	}
	// The consumer decodes them, skipping records before the offset it asked for.
	spool.DecodeBatches(data, 1, 0, func(r spool.Record) error {
		fmt.Println(r.Offset, string(r.Value))
		return nil
	})
	fmt.Println("next:", next)
	// Output:
	// 1 b
	// 2 c
	// next: 3
}

func ExampleOffsetStore() {
	dir, _ := os.MkdirTemp("", "spool-offsets")
	defer os.RemoveAll(dir)
	s, err := spool.OpenOffsets(dir)
	if err != nil {
		log.Fatal(err)
	}
	s.Commit("host-a", "logs", 42) // durable when Commit returns
	s.Close()

	s, _ = spool.OpenOffsets(dir) // after a restart
	defer s.Close()
	next, ok := s.Get("host-a", "logs")
	fmt.Println(next, ok)
	// Output: 42 true
}

// A pull server checks a consumer's stored position (log id, epoch, next
// offset) against the log before serving from it.
func ExampleLog_EpochEnd() {
	dir, _ := os.MkdirTemp("", "spool-example")
	defer os.RemoveAll(dir)
	l, err := spool.Open(spool.Config{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(context.Background(), spool.Record{Value: []byte("a")}, spool.Record{Value: []byte("b")}); err != nil {
		log.Fatal(err)
	}
	pos := spool.Position{ID: l.ID(), Epoch: 0, Next: 2} // as the consumer stored it

	switch end, ok := l.EpochEnd(pos.Epoch); {
	case pos.ID != l.ID() || !ok:
		fmt.Println("another log: start over by policy, never continue these offsets")
	case end < pos.Next:
		fmt.Printf("records %d..%d are gone: continue at %d\n", end, pos.Next-1, end)
	default:
		fmt.Printf("serve from %d in epoch %d\n", pos.Next, l.EpochOf(pos.Next))
	}
	// Output:
	// serve from 2 in epoch 0
}
