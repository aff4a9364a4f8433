package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/console"
)

// A program that embeds a node serves the console, /status and /metrics
// on its own mux.
func Example() {
	dir, _ := os.MkdirTemp("", "fastmq-console-example-")
	defer os.RemoveAll(dir)
	node, err := fastmq.New(fastmq.Config{Name: "host-1", DataDir: filepath.Join(dir, "host-1")})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()
	if _, err := node.Publish(context.Background(), "events", []byte("hello")); err != nil {
		log.Fatal(err)
	}

	c, err := console.New(console.Config{Node: node})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	mux := http.NewServeMux()
	c.Register(mux)
	srv := httptest.NewServer(mux) // in a program: http.ListenAndServe(addr, mux)
	defer srv.Close()

	res, err := http.Get(srv.URL + "/status")
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	var st fastmq.Status
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Name, len(st.Streams), "stream")
	// Output: host-1 1 stream
}
