package tail_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fastmq/fastmq/internal/tail"
)

// Follow a file, hand its lines to a sink, and persist the position once
// the sink has them.
func Example() {
	dir, err := os.MkdirTemp("", "tail-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	logPath := filepath.Join(dir, "app.log")
	if err := os.WriteFile(logPath, []byte("hello\nworld\r\nincomplete"), 0o644); err != nil {
		panic(err)
	}

	t, err := tail.New(tail.Config{
		Paths:     []string{logPath},
		StateFile: filepath.Join(dir, "positions"),
	})
	if err != nil {
		panic(err)
	}
	defer t.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := 0
	err = t.Run(ctx, func(lines []tail.Line) error {
		for _, l := range lines {
			fmt.Printf("%s (next line at %d)\n", l.Text, l.Pos.Offset)
			seen++
		}
		if seen == 2 {
			cancel() // a shipper would run until shutdown
		}
		return nil
	})
	fmt.Println("run:", err)
	if err := t.Commit(); err != nil { // after the sink is durable
		panic(err)
	}
	fmt.Println("committed offset:", t.Positions()[0].Offset)
	// Output:
	// hello (next line at 6)
	// world (next line at 13)
	// run: context canceled
	// committed offset: 13
}

// A restarted Tailer resumes after the last committed line.
func ExampleTailer_Commit() {
	dir, err := os.MkdirTemp("", "tail-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	logPath := filepath.Join(dir, "app.log")
	cfg := tail.Config{Paths: []string{logPath}, StateFile: filepath.Join(dir, "positions")}

	readAll := func(want int) {
		t, err := tail.New(cfg)
		if err != nil {
			panic(err)
		}
		defer t.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		n := 0
		t.Run(ctx, func(lines []tail.Line) error {
			for _, l := range lines {
				fmt.Println(string(l.Text))
			}
			if n += len(lines); n >= want {
				cancel()
			}
			return nil
		})
		if err := t.Commit(); err != nil {
			panic(err)
		}
	}

	os.WriteFile(logPath, []byte("one\ntwo\n"), 0o644)
	readAll(2)
	f, _ := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("three\n")
	f.Close()
	fmt.Println("-- restart --")
	readAll(1)
	// Output:
	// one
	// two
	// -- restart --
	// three
}
