package rpc_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fastmq/fastmq/discovery/discoverytest"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/rpc"
	"github.com/fastmq/fastmq/socket"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// join adds a node to the fake mesh, closed (as failed) at cleanup.
func join(t testing.TB, mesh *discoverytest.Mesh, name string) *discoverytest.Node {
	t.Helper()
	n, err := mesh.Join(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// newMesh returns a fake mesh closed at cleanup.
func newMesh(t testing.TB) *discoverytest.Mesh {
	mesh := discoverytest.NewMesh()
	t.Cleanup(func() { mesh.Close() })
	return mesh
}

// serve starts a server of service "svc" on node name, closed at cleanup.
func serve(t testing.TB, mesh *discoverytest.Mesh, name string, h rpc.Handler, mod func(*rpc.ServerConfig)) *rpc.Server {
	t.Helper()
	cfg := rpc.ServerConfig{Service: "svc", Handler: h, Discovery: join(t, mesh, name), Node: name}
	if mod != nil {
		mod(&cfg)
	}
	s, err := rpc.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// client starts a client of "svc" on its own node, closed at cleanup, and
// waits until it knows want instances.
func client(t testing.TB, mesh *discoverytest.Mesh, want int, mod func(*rpc.ClientConfig)) *rpc.Client {
	t.Helper()
	cfg := rpc.ClientConfig{Service: "svc", Discovery: join(t, mesh, "client-"+t.Name())}
	if mod != nil {
		mod(&cfg)
	}
	c, err := rpc.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitForInstances(ctx, want); err != nil {
		t.Fatal(err)
	}
	return c
}

// echo replies with the request prefixed by name.
func echo(name string) rpc.Handler {
	return func(ctx context.Context, req []byte) ([]byte, error) {
		return append([]byte(name+":"), req...), nil
	}
}

// waitConnected waits until the client's DEALERs are connected to every
// instance it knows, so that timing-sensitive tests start level.
func waitConnected(t testing.TB, c *rpc.Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// One call per instance at most: each call goes to a connected one first.
	testutil.WaitFor(t, "client connected", 0, func() bool {
		_, err := c.Call(ctx, []byte("warmup"), rpc.CallOptions{})
		return err == nil && len(c.Instances()) >= n
	})
}

// relay is a ROUTER-DEALER proxy in front of a server that can drop
// replies: the fault the reply cache exists for.
type relay struct {
	front, back *socket.Socket
	ep          string
	drop        chan struct{} // each receive drops one reply
	wg          sync.WaitGroup
}

func newRelay(t testing.TB, backend string) *relay {
	t.Helper()
	front, err := socket.New(socket.Router, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	back, err := socket.New(socket.Dealer, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := front.Bind("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Connect(backend); err != nil {
		t.Fatal(err)
	}
	r := &relay{front: front, back: back, ep: ep, drop: make(chan struct{}, 16)}
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		for {
			m, err := front.Recv(context.Background())
			if err != nil {
				return
			}
			if back.Send(context.Background(), m) != nil {
				return
			}
		}
	}()
	go func() {
		defer r.wg.Done()
		for {
			m, err := back.Recv(context.Background())
			if err != nil {
				return
			}
			select {
			case <-r.drop:
				continue
			default:
			}
			if front.Send(context.Background(), m) != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		front.Close()
		back.Close()
		r.wg.Wait()
	})
	return r
}
