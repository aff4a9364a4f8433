package follow_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/discovery/discoverytest"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/follow"
	"github.com/fastmq/fastmq/socket"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newSocket(t *testing.T, kind socket.Kind) *socket.Socket {
	t.Helper()
	s, err := socket.New(kind, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// instance is a PULL socket on TCP advertised as service "work" by node.
type instance struct {
	node *discoverytest.Node
	sock *socket.Socket
	ep   string
}

func newInstance(t *testing.T, mesh *discoverytest.Mesh, name string) *instance {
	t.Helper()
	node, err := mesh.Join(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	s := newSocket(t, socket.Pull)
	ep, err := s.Bind("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{node: node, sock: s, ep: ep}
	in.advertise(t, ep)
	return in
}

func (in *instance) advertise(t *testing.T, eps ...string) {
	t.Helper()
	if err := in.node.Advertise(discovery.Service{Name: "work", Kind: "PULL", Endpoints: eps}); err != nil {
		t.Fatal(err)
	}
}

// waitEndpoints waits until f reports want and s has as many peers: a
// disconnected peer leaves the socket's round robin in the background.
func waitEndpoints(t *testing.T, f *follow.Follower, s *socket.Socket, want ...string) {
	t.Helper()
	slices.Sort(want)
	testutil.WaitFor(t, "follower connected to "+join(want), 0, func() bool {
		return slices.Equal(f.Endpoints(), want) && s.Stats().Peers == len(want)
	})
}

func join(eps []string) string {
	if len(eps) == 0 {
		return "nothing"
	}
	s := eps[0]
	for _, e := range eps[1:] {
		s += ", " + e
	}
	return s
}

// roundTrip sends body on push and fails unless in receives it.
func roundTrip(t *testing.T, push *socket.Socket, in *instance, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := push.Send(ctx, socket.NewMsgString(body)); err != nil {
		t.Fatalf("send %q: %v", body, err)
	}
	m, err := in.sock.Recv(ctx)
	if err != nil {
		t.Fatalf("receive %q at %s: %v", body, in.ep, err)
	}
	if got := string(m.Frames[0]); got != body {
		t.Fatalf("%s received %q, want %q", in.ep, got, body)
	}
}

// TestFollowConnectsAndDisconnects proves that a PUSH socket follows the
// instances of a service over real TCP: it reaches an instance once
// discovered, moves with its endpoints, and stops sending to instances that
// withdraw, fail or leave.
func TestFollowConnectsAndDisconnects(t *testing.T) {
	mesh := discoverytest.NewMesh()
	defer mesh.Close()
	client, err := mesh.Join("client")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	a := newInstance(t, mesh, "a")

	push := newSocket(t, socket.Push)
	f, err := follow.New(follow.Config{Socket: push, Service: "work", Discovery: client})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- f.Run(context.Background()) }()

	waitEndpoints(t, f, push, a.ep)
	roundTrip(t, push, a, "to a")

	b := newInstance(t, mesh, "b")
	waitEndpoints(t, f, push, a.ep, b.ep)

	if err := a.node.Withdraw("work"); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, f, push, b.ep)
	for _, body := range []string{"1", "2", "3"} { // round robin has only b left
		roundTrip(t, push, b, body)
	}

	// a comes back on a new endpoint: the old one stays disconnected.
	moved := newSocket(t, socket.Pull)
	movedEP, err := moved.Bind("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a.advertise(t, movedEP)
	waitEndpoints(t, f, push, movedEP, b.ep)
	a.sock, a.ep = moved, movedEP
	if err := b.node.Close(); err != nil { // b fails
		t.Fatal(err)
	}
	waitEndpoints(t, f, push, movedEP)
	roundTrip(t, push, a, "to a again")
	if err := a.node.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, f, push)

	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, follow.ErrClosed) {
		t.Fatalf("Run after Close returned %v, want ErrClosed", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := f.Run(context.Background()); !errors.Is(err, follow.ErrClosed) {
		t.Fatalf("Run after Close returned %v, want ErrClosed", err)
	}
}

// TestRunEnds checks Run's errors: the context's, and the end of the watch
// when discovery closes.
func TestRunEnds(t *testing.T) {
	mesh := discoverytest.NewMesh()
	defer mesh.Close()
	client, err := mesh.Join("client")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	push := newSocket(t, socket.Push)
	newFollower := func() *follow.Follower {
		f, err := follow.New(follow.Config{Socket: push, Service: "work", Discovery: client})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := newFollower().Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a cancelled context: %v", err)
	}

	f := newFollower()
	errc := make(chan error, 1)
	go func() { errc <- f.Run(context.Background()) }()
	mesh.Close()
	if err := <-errc; err == nil || errors.Is(err, follow.ErrClosed) {
		t.Fatalf("Run after discovery closed returned %v, want the watch's end", err)
	}
	if err := f.Run(context.Background()); err == nil {
		t.Fatal("a second Run returned nil")
	}
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	mesh := discoverytest.NewMesh()
	defer mesh.Close()
	client, err := mesh.Join("client")
	if err != nil {
		t.Fatal(err)
	}
	push := newSocket(t, socket.Push)
	for name, cfg := range map[string]follow.Config{
		"no socket":    {Service: "work", Discovery: client},
		"no service":   {Socket: push, Discovery: client},
		"no discovery": {Socket: push, Service: "work"},
	} {
		if _, err := follow.New(cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}
