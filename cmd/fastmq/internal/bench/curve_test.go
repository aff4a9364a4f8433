package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/socket"
)

// TestCurveEnds checks that --curve makes the receiving end a CURVE server
// that refuses a NULL peer and the sending end a client it accepts.
func TestCurveEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := &SocketOptions{Curve: true}
	rcfg, err := endConfig(o, socket.Config{}, socket.Pull, true)
	if err != nil {
		t.Fatal(err)
	}
	pull, err := socket.New(socket.Pull, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pull.Close()
	ep, err := pull.Bind("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := socket.New(socket.Push, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.Connect(ep); err != nil {
		t.Fatal(err)
	}
	for refused := false; !refused; {
		select {
		case e := <-pull.Events():
			refused = e.Type == socket.EventHandshakeFailed
		case <-ctx.Done():
			t.Fatal("the CURVE end did not refuse a NULL peer")
		}
	}
	plain.Close()

	scfg, err := endConfig(o, socket.Config{}, socket.Push, false)
	if err != nil {
		t.Fatal(err)
	}
	push, err := socket.New(socket.Push, scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer push.Close()
	if err := push.Connect(ep); err != nil {
		t.Fatal(err)
	}
	if err := push.Send(ctx, socket.NewMsgString("sealed")); err != nil {
		t.Fatal(err)
	}
	m, err := pull.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Frames) != 1 || string(m.Frames[0]) != "sealed" {
		t.Fatalf("got %q", m)
	}
}

// TestSocketCurveShort runs short CURVE pushpull and reqrep benchmarks in
// one process.
func TestSocketCurveShort(t *testing.T) {
	for _, pattern := range []string{"pushpull", "reqrep"} {
		var out strings.Builder
		o := &SocketOptions{Size: 100, Count: 500, Transport: "tcp", Rounds: 1, Curve: true}
		if err := Socket(context.Background(), &out, pattern, o); err != nil {
			t.Fatalf("%s: %v", pattern, err)
		}
		t.Log(out.String())
		if !strings.Contains(out.String(), pattern+" tcp, curve size=100") {
			t.Errorf("%s: output %q does not say curve", pattern, out.String())
		}
	}
	o := &SocketOptions{Size: 100, Count: 500, Transport: "inproc", Rounds: 1, Curve: true}
	if err := Socket(context.Background(), &strings.Builder{}, "pushpull", o); err == nil {
		t.Error("--curve over inproc ran")
	}
}
