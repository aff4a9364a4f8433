package ship_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/fastmq/fastmq/patterns/ship"
	"github.com/fastmq/fastmq/spool"
)

// Ship a log file into a local spool until the context ends; collectors
// pull the spool (see package collect).
func Example() {
	dir, err := os.MkdirTemp("", "ship-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	logPath := filepath.Join(dir, "access.log")
	if err := os.WriteFile(logPath, []byte("GET /\nGET /about\n"), 0o644); err != nil {
		log.Fatal(err)
	}

	l, err := spool.Open(spool.Config{Dir: filepath.Join(dir, "spool")})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	s, err := ship.New(ship.Config{
		Spool:     l,
		Stream:    "access-log",
		Paths:     []string{logPath},
		StateFile: filepath.Join(dir, "ship.positions"),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Stop once both lines are shipped (a real shipper runs until
		// SIGTERM).
		l.Wait(ctx, 1)
		cancel()
	}()
	if err := s.Run(ctx); !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}

	r, err := l.NewReader(0)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for range 2 {
		rec, err := r.Next(context.Background())
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s (%s=%s)\n", rec.Value, rec.Headers[0].Key, filepath.Base(string(rec.Headers[0].Value)))
	}
	// Output:
	// GET / (source=access.log)
	// GET /about (source=access.log)
}
