package socket

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
)

func TestReconnectAfterRestart(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		cfg := Config{ReconnectInterval: 5 * time.Millisecond, ReconnectIntervalMax: 50 * time.Millisecond}
		pull := mk(t, Pull, Config{})
		addr := bind(t, pull, ep())
		push := mk(t, Push, cfg)
		connect(t, push, addr)
		pub := mk(t, Pub, Config{})
		pubAddr := bind(t, pub, ep())
		sub := mk(t, Sub, cfg)
		if err := sub.Subscribe([]byte("x")); err != nil {
			t.Fatal(err)
		}
		connect(t, sub, pubAddr)
		mustSend(t, ctx, push, "1")
		eq(t, mustRecv(t, ctx, pull), "1")

		for round := range 2 {
			pull.Close()
			pub.Close()
			pull = mk(t, Pull, Config{})
			bind(t, pull, addr)
			pub = mk(t, Pub, Config{})
			bind(t, pub, pubAddr)
			// Messages queued for the dead connection before it was noticed
			// are lost; probe until the new connection carries them.
			testutil.WaitFor(t, "push reconnect", 0, func() bool {
				if err := push.Send(withTimeout(ctx, 20), NewMsgString("probe")); err != nil {
					return false
				}
				_, err := pull.Recv(withTimeout(ctx, 20))
				return err == nil
			})
			// The subscription is replayed: x-messages get through.
			testutil.WaitFor(t, "sub replay", 0, func() bool {
				mustSend(t, ctx, pub, "y-no")
				mustSend(t, ctx, pub, fmt.Sprint("x", round))
				m, err := sub.Recv(withTimeout(ctx, 20))
				return err == nil && string(m.Frames[0]) == fmt.Sprint("x", round)
			})
		}
	})
}

func TestIPCStaleFile(t *testing.T) {
	dir, err := os.MkdirTemp("", "fmq")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // leaves the socket file behind
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	s := mk(t, Pull, Config{})
	bind(t, s, "ipc://"+path)
	if err := s.Unbind("ipc://" + path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("socket file left after Unbind: %v", err)
	}
	bind(t, s, "ipc://"+path)
	// Now someone listens: a second bind must fail, not steal the path.
	s2 := mk(t, Pull, Config{})
	if _, err := s2.Bind("ipc://" + path); err == nil {
		t.Fatal("bind over a live ipc socket succeeded")
	}
	// A regular file is never removed.
	plain := filepath.Join(dir, "file")
	if err := os.WriteFile(plain, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Bind("ipc://" + plain); err == nil {
		t.Fatal("bind over a regular file succeeded")
	}
	if b, _ := os.ReadFile(plain); string(b) != "data" {
		t.Fatal("regular file clobbered")
	}
}

func TestConnectBeforeBind(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		addr := ep()
		if strings.HasPrefix(addr, "tcp://") {
			// Reserve a port, then free it so that nothing listens there.
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr = "tcp://" + l.Addr().String()
			l.Close()
		}
		push := mk(t, Push, Config{ReconnectInterval: 5 * time.Millisecond, ReconnectIntervalMax: 20 * time.Millisecond})
		connect(t, push, addr)
		waitEv(t, push, EventConnectRetried)
		waitEv(t, push, EventConnectRetried)
		if push.Stats().ConnectRetries < 2 {
			t.Fatalf("stats %+v", push.Stats())
		}
		pull := mk(t, Pull, Config{})
		bind(t, pull, addr)
		waitEv(t, push, EventConnected)
		mustSend(t, ctx, push, "late")
		eq(t, mustRecv(t, ctx, pull), "late")
	})
}
