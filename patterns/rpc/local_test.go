package rpc_test

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/localipc"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/rpc"
	"github.com/fastmq/fastmq/socket"
)

// callOK makes one call without an idempotency key (never retried) and
// checks its reply.
func callOK(t *testing.T, c *rpc.Client, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := c.Call(ctx, []byte("x"), rpc.CallOptions{})
	if err != nil || string(b) != want {
		t.Fatalf("Call = %q, %v; want %q", b, err, want)
	}
}

// reachedAt returns the endpoints the client's one instance is reached at.
func reachedAt(t *testing.T, c *rpc.Client) []string {
	t.Helper()
	ins := c.Instances()
	if len(ins) != 1 {
		t.Fatalf("client knows %d instances, want 1", len(ins))
	}
	return ins[0].Endpoints
}

// TestRPCLocalIPC checks that a server advertised in the mesh listens on
// the unix socket twin of its tcp endpoint without advertising it, that a
// client with the same directory connects to the twin alone, and that
// the twin goes with the server.
func TestRPCLocalIPC(t *testing.T) {
	mesh := newMesh(t)
	dir := testutil.ShortDir(t)
	srv := serve(t, mesh, "a", echo("a"), func(c *rpc.ServerConfig) { c.LocalIPCDir = dir })
	eps := srv.Endpoints()
	if len(eps) != 1 || !strings.HasPrefix(eps[0], "tcp://") {
		t.Fatalf("advertised %q, want the tcp endpoint alone", eps)
	}
	twin, ok := localipc.Path(dir, eps[0])
	if !ok || !slices.Equal(srv.LocalEndpoints(), []string{"ipc://" + twin}) {
		t.Fatalf("LocalEndpoints = %q, want the twin of %s in %s", srv.LocalEndpoints(), eps[0], dir)
	}
	c := client(t, mesh, 1, func(c *rpc.ClientConfig) { c.LocalIPCDir = dir })
	callOK(t, c, "a:x")
	if got := reachedAt(t, c); !slices.Equal(got, []string{"ipc://" + twin}) {
		t.Fatalf("the client reaches the instance at %q, want its twin %q alone", got, twin)
	}
	t.Run("other directory", func(t *testing.T) { // uses tcp
		far := client(t, mesh, 1, func(c *rpc.ClientConfig) { c.LocalIPCDir = testutil.ShortDir(t) })
		callOK(t, far, "a:x")
		if got := reachedAt(t, far); !slices.Equal(got, eps) {
			t.Fatalf("a client with another directory reaches the instance at %q, want %q", got, eps)
		}
	})
	srv.Close()
	if _, err := os.Stat(twin); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("twin after Close: %v, want it gone", err)
	}
}

// TestRPCLocalIPCFallsBack checks that a twin the client cannot use sends
// it to the tcp endpoint, with no call lost: a twin left by a server that
// died (connection refused), and one whose peer fails the handshake.
func TestRPCLocalIPCFallsBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		fake func(t *testing.T, path string)
	}{
		{"dead twin", func(t *testing.T, path string) {
			l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			l.SetUnlinkOnClose(false) // left behind, as by SIGKILL
			l.Close()
		}},
		{"no ZMTP peer", func(t *testing.T, path string) {
			l, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					c.Write([]byte("HTTP/1.0 400 nonsense\r\n\r\n"))
					c.Close()
				}
			}()
			t.Cleanup(func() { l.Close(); <-done })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mesh := newMesh(t)
			dir := testutil.ShortDir(t)
			srv := serve(t, mesh, "a", echo("a"), func(c *rpc.ServerConfig) { c.NoLocalIPC = true })
			twin, ok := localipc.Path(dir, srv.Endpoints()[0])
			if !ok {
				t.Fatal("no twin path")
			}
			tc.fake(t, twin)
			c := client(t, mesh, 1, func(c *rpc.ClientConfig) { c.LocalIPCDir = dir })
			callOK(t, c, "a:x") // sent while the DEALER tried the twin
			testutil.WaitFor(t, "the client on tcp", 0, func() bool {
				return slices.Equal(reachedAt(t, c), srv.Endpoints())
			})
			if st := c.Stats(); st.Failures != 0 || st.Retries != 0 {
				t.Fatalf("client stats %+v: the fallback cost a failed attempt", st)
			}
		})
	}
}

// TestRPCNoLocalIPC checks when no twin is made or used: when the server
// or the client says so, when the server's or the client's socket has an
// Authenticator (an address rule would refuse unix peers), and when the
// directory is open to others or is no directory. Calls go over tcp.
func TestRPCNoLocalIPC(t *testing.T) {
	open := testutil.ShortDir(t)
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	file := testutil.ShortDir(t) + "/file"
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	anyone := socket.AuthFunc(func(socket.AuthRequest) error { return nil })
	for _, tc := range []struct {
		name string
		srv  func(*rpc.ServerConfig)
		cli  func(*rpc.ClientConfig)
		twin bool // the server makes its twin (in dir) all the same
	}{
		{name: "server NoLocalIPC", srv: func(c *rpc.ServerConfig) { c.NoLocalIPC = true }},
		{name: "server Authenticator", srv: func(c *rpc.ServerConfig) { c.Socket.Authenticator = anyone }},
		{name: "client NoLocalIPC", cli: func(c *rpc.ClientConfig) { c.NoLocalIPC = true }, twin: true},
		{name: "client Authenticator", cli: func(c *rpc.ClientConfig) { c.Socket.Authenticator = anyone }, twin: true},
		{name: "dir writable by others", srv: func(c *rpc.ServerConfig) { c.LocalIPCDir = open }, cli: func(c *rpc.ClientConfig) { c.LocalIPCDir = open }},
		{name: "dir is a file", srv: func(c *rpc.ServerConfig) { c.LocalIPCDir = file }, cli: func(c *rpc.ClientConfig) { c.LocalIPCDir = file }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mesh := newMesh(t)
			dir := testutil.ShortDir(t)
			srv := serve(t, mesh, "a", echo("a"), func(c *rpc.ServerConfig) {
				c.LocalIPCDir = dir
				if tc.srv != nil {
					tc.srv(c)
				}
			})
			if got := len(srv.LocalEndpoints()); got != 0 != tc.twin {
				t.Fatalf("server twins %q, want twin %v", srv.LocalEndpoints(), tc.twin)
			}
			c := client(t, mesh, 1, func(c *rpc.ClientConfig) {
				c.LocalIPCDir = dir
				if tc.cli != nil {
					tc.cli(c)
				}
			})
			callOK(t, c, "a:x")
			if got := reachedAt(t, c); !slices.Equal(got, srv.Endpoints()) {
				t.Fatalf("the client reaches the instance at %q, want tcp %q", got, srv.Endpoints())
			}
		})
	}
	if ents, _ := os.ReadDir(open); len(ents) != 0 {
		t.Fatalf("the open directory got %d files", len(ents))
	}
}
