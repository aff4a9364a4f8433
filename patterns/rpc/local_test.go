package rpc_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/patterns/rpc"
	"github.com/fastmq/fastmq/socket"
)

// ipcDir returns a new private directory for unix sockets, with a short
// path (unix socket paths are short: not under t.TempDir).
func ipcDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fqrpc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// callOK makes one call and checks its reply.
func callOK(t *testing.T, c *rpc.Client, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := c.Call(ctx, []byte("x"), rpc.CallOptions{})
	if err != nil || string(b) != want {
		t.Fatalf("Call = %q, %v; want %q", b, err, want)
	}
}

// TestRPCLocalIPC checks that a server advertised in the mesh also
// listens on a unix socket in its directory, that a client on the same
// host connects there alone, and that the socket file goes with the
// server.
func TestRPCLocalIPC(t *testing.T) {
	mesh := newMesh(t)
	dir := ipcDir(t)
	srv := serve(t, mesh, "a", echo("a"), func(c *rpc.ServerConfig) { c.LocalIPCDir = dir })
	eps := srv.Endpoints()
	if len(eps) != 2 || !strings.HasPrefix(eps[0], "tcp://") || !strings.HasPrefix(eps[1], "ipc://"+dir+"/") {
		t.Fatalf("Endpoints = %q, want the tcp endpoint, then a unix socket in %s", eps, dir)
	}
	c := client(t, mesh, 1, nil)
	callOK(t, c, "a:x")
	ins := c.Instances()
	if len(ins) != 1 || !slices.Equal(ins[0].Endpoints, eps[1:]) {
		t.Fatalf("the client connects to %v, want the unix socket %q alone", ins, eps[1])
	}
	if st := srv.Stats(); st.Handled != 1 {
		t.Fatalf("server handled %d, want 1", st.Handled)
	}
	path := strings.TrimPrefix(eps[1], "ipc://")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("socket file: %v", err)
	}
	srv.Close()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file after Close: %v, want it gone", err)
	}
}

// TestRPCLocalIPCElsewhere checks that a client that does not see an
// instance's unix socket (the instance is on another host) connects to
// its other endpoints.
func TestRPCLocalIPCElsewhere(t *testing.T) {
	mesh := newMesh(t)
	router, err := socket.New(socket.Router, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := router.Bind("tcp://127.0.0.1:0")
	if err != nil {
		router.Close()
		t.Fatal(err)
	}
	srv, err := rpc.NewServer(rpc.ServerConfig{Service: "svc", Handler: echo("far"), Listener: router, AdvertiseEndpoints: []string{tcp}})
	if err != nil {
		router.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	// The socket of the instance, as it would be on its own host.
	far := "ipc://" + filepath.Join(ipcDir(t), "rpc-000000000000000000000000.sock")
	node := join(t, mesh, "far")
	if err := node.Advertise(discovery.Service{Name: "svc", Kind: "ROUTER", Endpoints: []string{tcp, far}}); err != nil {
		t.Fatal(err)
	}
	c := client(t, mesh, 1, nil)
	callOK(t, c, "far:x")
	if ins := c.Instances(); len(ins) != 1 || !slices.Equal(ins[0].Endpoints, []string{tcp}) {
		t.Fatalf("the client connects to %v, want %q alone", ins, tcp)
	}
}

// TestRPCNoLocalIPC checks when a server does without the unix socket:
// when told to, when its socket has an Authenticator (an address rule
// would refuse unix peers), when its directory is open to others or is
// not a directory. Each still serves over tcp.
func TestRPCNoLocalIPC(t *testing.T) {
	open := ipcDir(t)
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(ipcDir(t), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*rpc.ServerConfig)
	}{
		{"NoLocalIPC", func(c *rpc.ServerConfig) { c.NoLocalIPC = true }},
		{"Authenticator", func(c *rpc.ServerConfig) {
			c.Socket.Authenticator = socket.AuthFunc(func(socket.AuthRequest) error { return nil })
		}},
		{"dir writable by others", func(c *rpc.ServerConfig) { c.LocalIPCDir = open }},
		{"dir is a file", func(c *rpc.ServerConfig) { c.LocalIPCDir = file }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mesh := newMesh(t)
			srv := serve(t, mesh, "a", echo("a"), tc.mod)
			if eps := srv.Endpoints(); len(eps) != 1 || !strings.HasPrefix(eps[0], "tcp://") {
				t.Fatalf("Endpoints = %q, want the tcp endpoint alone", eps)
			}
			c := client(t, mesh, 1, nil)
			callOK(t, c, "a:x")
		})
	}
	if ents, _ := os.ReadDir(open); len(ents) != 0 {
		t.Fatalf("the open directory got %d files", len(ents))
	}
}

// TestRPCLocalIPCPrunesLeftovers checks that a server start removes the
// unix sockets servers left in the directory when they died, and only
// those: a live server's socket and files of other names stay.
func TestRPCLocalIPCPrunesLeftovers(t *testing.T) {
	dir := ipcDir(t)
	// A socket nobody listens on any more, left as a killed server leaves it.
	dead := filepath.Join(dir, "rpc-111111111111111111111111.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: dead, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	other := filepath.Join(dir, "other.sock")
	lo, err := net.ListenUnix("unix", &net.UnixAddr{Name: other, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	lo.SetUnlinkOnClose(false)
	lo.Close()
	live := filepath.Join(dir, "rpc-222222222222222222222222.sock")
	ll, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ll.Close()
	go func() { // answer the liveness check
		for {
			c, err := ll.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	mesh := newMesh(t)
	serve(t, mesh, "a", echo("a"), func(c *rpc.ServerConfig) { c.LocalIPCDir = dir })
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead server's socket: %v, want it removed", err)
	}
	for _, p := range []string{live, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v, want it kept", filepath.Base(p), err)
		}
	}
}
