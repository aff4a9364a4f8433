package pull_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// A publisher serves its spool; a consumer pulls from it with its own
// offsets, which survive a restart.
func Example() {
	dir, _ := os.MkdirTemp("", "pull-example-")
	defer os.RemoveAll(dir)

	l, err := spool.Open(spool.Config{Dir: dir + "/spool"})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	for _, v := range []string{"a", "b", "c"} {
		if _, err := l.Append(ctx, spool.Record{Value: []byte(v)}); err != nil {
			log.Fatal(err)
		}
	}
	srv, err := pull.NewServer(pull.ServerConfig{
		Lookup: func(stream string) (*spool.Log, bool) { return l, stream == "letters" },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	offsets, err := spool.OpenOffsets(dir + "/offsets")
	if err != nil {
		log.Fatal(err)
	}
	defer offsets.Close()
	c, err := pull.NewConsumer(pull.ConsumerConfig{
		Stream:     "letters",
		Offsets:    offsets,
		Publishers: map[string]string{"host-1": srv.Endpoints()[0]},
	})
	if err != nil {
		log.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		m, err := c.Next(rctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s@%d %s\n", m.Publisher, m.Offset, m.Value)
		c.Ack(m)
	}
	c.Close() // commits the acknowledged position
	next, _ := offsets.Get("host-1", "letters")
	fmt.Println("committed:", next)
	// Output:
	// host-1@0 a
	// host-1@1 b
	// host-1@2 c
	// committed: 3
}
