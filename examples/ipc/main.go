// Command ipc shows local IPC between two processes over a unix socket,
// without a daemon: the parent binds a REP socket on ipc://, starts itself
// again as a client that sends requests over a REQ socket, and answers them.
//
//	go run ./examples/ipc
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/fastmq/fastmq/socket"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "client" {
		client(os.Args[2])
		return
	}
	dir, err := os.MkdirTemp("", "ipc-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	endpoint := "ipc://" + filepath.Join(dir, "upper.sock")

	rep, err := socket.New(socket.Rep, socket.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer rep.Close()
	if _, err := rep.Bind(endpoint); err != nil {
		log.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	cmd := exec.Command(exe, "client", endpoint)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		req, err := rep.Recv(ctx)
		if err != nil {
			log.Fatal(err)
		}
		reply := strings.ToUpper(string(req.Frames[0]))
		if err := rep.Send(ctx, socket.NewMsg([]byte(reply))); err != nil {
			log.Fatal(err)
		}
	}
	if err := cmd.Wait(); err != nil {
		log.Fatal(err)
	}
}

func client(endpoint string) {
	req, err := socket.New(socket.Req, socket.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer req.Close()
	if err := req.Connect(endpoint); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, word := range []string{"hello", "from", "another process"} {
		if err := req.Send(ctx, socket.NewMsg([]byte(word))); err != nil {
			log.Fatal(err)
		}
		rep, err := req.Recv(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s -> %s\n", word, rep.Frames[0])
	}
}
