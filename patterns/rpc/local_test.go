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

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/discovery/discoverytest"
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

// needTwins skips where unix socket twins are not used (Windows).
func needTwins(t *testing.T) {
	if !localipc.Supported() {
		t.Skip("no unix socket twins on this system")
	}
}

// deadEP is a tcp endpoint nobody listens on (port 1 on loopback): a
// server that advertises it is reachable over its twin alone.
const deadEP = "tcp://127.0.0.1:1"

// serveOnlyTwin starts a server of "svc" on node name that listens on
// tcp on an ephemeral port but advertises deadEP, so that it binds deadEP's
// twin in dir: a call that reaches it went over the twin. adv, if set,
// stands between the server and the mesh.
func serveOnlyTwin(t *testing.T, node *discoverytest.Node, name, dir, advertise string, adv func(rpc.Advertiser) rpc.Advertiser) *rpc.Server {
	t.Helper()
	router, err := socket.New(socket.Router, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := router.Bind("tcp://127.0.0.1:0"); err != nil {
		router.Close()
		t.Fatal(err)
	}
	var d rpc.Advertiser = node
	if adv != nil {
		d = adv(node)
	}
	srv, err := rpc.NewServer(rpc.ServerConfig{Service: "svc", Handler: echo(name), Listener: router,
		AdvertiseEndpoints: []string{advertise}, Discovery: d, LocalIPCDir: dir})
	if err != nil {
		router.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// TestRPCLocalIPC checks that a server advertised in the mesh listens on
// the unix socket twin of its tcp endpoint without advertising it, that a
// client with the same directory connects to the twin alone, a client
// looking elsewhere uses tcp, and the twin goes with the server.
func TestRPCLocalIPC(t *testing.T) {
	needTwins(t)
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

// TestRPCLocalIPCOnlyTwin checks, with servers whose advertised tcp
// endpoint is dead, that calls really go over the twin: to a server at a
// specific address, to one that listens on every address (whose endpoint
// gossip rewrites to the address the node gossips from), and to a server
// that restarts at the same endpoint after its twin went away under the
// client.
func TestRPCLocalIPCOnlyTwin(t *testing.T) {
	needTwins(t)
	t.Run("specific address", func(t *testing.T) {
		mesh := newMesh(t)
		dir := testutil.ShortDir(t)
		serveOnlyTwin(t, join(t, mesh, "a"), "a", dir, deadEP, nil)
		c := client(t, mesh, 1, func(c *rpc.ClientConfig) { c.LocalIPCDir = dir })
		callOK(t, c, "a:x")
	})
	t.Run("every address", func(t *testing.T) {
		mesh := newMesh(t)
		dir := testutil.ShortDir(t)
		// Gossip gives ":1" the address the node gossips from.
		gossiped := func(d rpc.Advertiser) rpc.Advertiser { return rewrite{d, "tcp://0.0.0.0:", "tcp://127.0.0.1:"} }
		srv := serveOnlyTwin(t, join(t, mesh, "a"), "a", dir, "tcp://0.0.0.0:1", gossiped)
		if twin, _ := localipc.Path(dir, "tcp://0.0.0.0:1"); !slices.Equal(srv.LocalEndpoints(), []string{"ipc://" + twin}) {
			t.Fatalf("LocalEndpoints = %q, want %q", srv.LocalEndpoints(), twin)
		}
		c := client(t, mesh, 1, func(c *rpc.ClientConfig) { c.LocalIPCDir = dir })
		callOK(t, c, "a:x")
	})
	t.Run("restart", func(t *testing.T) {
		mesh := newMesh(t)
		dir := testutil.ShortDir(t)
		node := join(t, mesh, "a")
		first := serveOnlyTwin(t, node, "a", dir, deadEP, nil)
		c := client(t, mesh, 1, func(c *rpc.ClientConfig) { c.LocalIPCDir = dir })
		callOK(t, c, "a:x")
		// The twin goes; the instance stays advertised a while: the
		// client's reconnection finds no file and falls back to tcp.
		first.Close()
		testutil.WaitFor(t, "the client back on tcp", 0, func() bool {
			return slices.Equal(reachedAt(t, c), []string{deadEP})
		})
		node.Close()
		testutil.WaitFor(t, "the instance gone", 0, func() bool { return len(c.Instances()) == 0 })
		serveOnlyTwin(t, join(t, mesh, "a"), "again", dir, deadEP, nil)
		if err := c.WaitForInstances(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		callOK(t, c, "again:x") // a missing twin is looked for again
	})
}

// rewrite is an Advertiser that rewrites the endpoints it advertises, as
// gossip does with the wildcard host of an endpoint.
type rewrite struct {
	rpc.Advertiser
	from, to string
}

func (r rewrite) Advertise(s discovery.Service) error {
	s.Endpoints = slices.Clone(s.Endpoints)
	for i, ep := range s.Endpoints {
		s.Endpoints[i] = strings.Replace(ep, r.from, r.to, 1)
	}
	return r.Advertiser.Advertise(s)
}

// TestRPCLocalIPCFallsBack checks that a twin the client cannot use sends
// it to the tcp endpoint, with no call lost: a twin left by a server that
// died (connection refused), and one whose peer fails the handshake,
// slowly, while a call waits to be sent.
func TestRPCLocalIPCFallsBack(t *testing.T) {
	needTwins(t)
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
					// Long enough for the call to be sent meanwhile.
					time.Sleep(200 * time.Millisecond)
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

// TestRPCNoLocalIPC checks when no twin is made: when the server says so,
// when its socket has an Authenticator (an address rule would refuse unix
// peers), when the directory is open to others or is no directory; and
// when a twin there is not used: when the client says so, when its socket
// has an Authenticator, when the directory became open to others. Calls
// go over tcp.
func TestRPCNoLocalIPC(t *testing.T) {
	needTwins(t)
	anyone := socket.AuthFunc(func(socket.AuthRequest) error { return nil })
	for _, tc := range []struct {
		name  string
		srv   func(c *rpc.ServerConfig, dir string)
		cli   func(*rpc.ClientConfig)
		after func(t *testing.T, dir string) // once the server runs
		twin  bool                           // the server makes its twin all the same
	}{
		{name: "server NoLocalIPC", srv: func(c *rpc.ServerConfig, _ string) { c.NoLocalIPC = true }},
		{name: "server Authenticator", srv: func(c *rpc.ServerConfig, _ string) { c.Socket.Authenticator = anyone }},
		{name: "dir writable by others", srv: func(_ *rpc.ServerConfig, dir string) { os.Chmod(dir, 0o777) }},
		{name: "dir is a file", srv: func(c *rpc.ServerConfig, dir string) {
			c.LocalIPCDir = dir + "/file"
			os.WriteFile(c.LocalIPCDir, nil, 0o600)
		}},
		{name: "client NoLocalIPC", cli: func(c *rpc.ClientConfig) { c.NoLocalIPC = true }, twin: true},
		{name: "client Authenticator", cli: func(c *rpc.ClientConfig) { c.Socket.Authenticator = anyone }, twin: true},
		{name: "dir opened to others", after: func(t *testing.T, dir string) {
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}, twin: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mesh := newMesh(t)
			dir := testutil.ShortDir(t)
			srv := serve(t, mesh, "a", echo("a"), func(c *rpc.ServerConfig) {
				c.LocalIPCDir = dir
				if tc.srv != nil {
					tc.srv(c, dir)
				}
			})
			if got := len(srv.LocalEndpoints()); got != 0 != tc.twin {
				t.Fatalf("server twins %q, want twin %v", srv.LocalEndpoints(), tc.twin)
			}
			if tc.after != nil {
				tc.after(t, dir)
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
}
