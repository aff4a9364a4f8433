package socket

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/go-zeromq/zmq4"

	"github.com/fastmq/fastmq/internal/testutil"
)

// zmq4 sockets as peers: cheap in-process evidence of wire compatibility
// with another ZMTP implementation (ZMTP 3.0, subscription messages).

func zsock(t *testing.T, mkz func(context.Context, ...zmq4.Option) zmq4.Socket) (zmq4.Socket, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	z := mkz(ctx)
	t.Cleanup(func() {
		z.Close()
		cancel()
	})
	return z, cancel
}

func TestZmq4PushPull(t *testing.T) {
	ctx := tctx(t)
	t.Run("zmq4-push-to-us", func(t *testing.T) {
		pull := mk(t, Pull, Config{})
		addr := bind(t, pull, "tcp://127.0.0.1:0")
		z, _ := zsock(t, zmq4.NewPush)
		if err := z.Dial(addr); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if err := z.Send(zmq4.NewMsgFrom([]byte(fmt.Sprint(i)), []byte("x"))); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 20 {
			eq(t, mustRecv(t, ctx, pull), fmt.Sprint(i), "x")
		}
	})
	t.Run("us-to-zmq4-pull", func(t *testing.T) {
		z, _ := zsock(t, zmq4.NewPull)
		if err := z.Listen("tcp://127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		push := mk(t, Push, Config{})
		connect(t, push, "tcp://"+z.Addr().String())
		for i := range 20 {
			mustSend(t, ctx, push, fmt.Sprint(i), strings.Repeat("y", 300))
		}
		for i := range 20 {
			m, err := z.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Frames) != 2 || string(m.Frames[0]) != fmt.Sprint(i) || len(m.Frames[1]) != 300 {
				t.Fatalf("zmq4 got %q", m.Frames)
			}
		}
	})
}

func TestZmq4ReqRep(t *testing.T) {
	ctx := tctx(t)
	t.Run("zmq4-req-to-our-rep", func(t *testing.T) {
		rep := mk(t, Rep, Config{})
		addr := bind(t, rep, "tcp://127.0.0.1:0")
		z, _ := zsock(t, zmq4.NewReq)
		if err := z.Dial(addr); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			for range 3 {
				m, err := rep.Recv(ctx)
				if err == nil {
					err = rep.Send(ctx, NewMsg(append([]byte("re:"), m.Frames[0]...)))
				}
				if err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		for i := range 3 {
			if err := z.Send(zmq4.NewMsgString(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
			m, err := z.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Frames[0]) != "re:"+fmt.Sprint(i) {
				t.Fatalf("zmq4 REQ got %q", m.Frames)
			}
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("our-req-to-zmq4-rep", func(t *testing.T) {
		z, _ := zsock(t, zmq4.NewRep)
		if err := z.Listen("tcp://127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		req := mk(t, Req, Config{})
		connect(t, req, "tcp://"+z.Addr().String())
		errc := make(chan error, 1)
		go func() {
			for range 3 {
				m, err := z.Recv()
				if err == nil {
					err = z.Send(zmq4.NewMsgString("re:" + string(m.Frames[0])))
				}
				if err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		for i := range 3 {
			mustSend(t, ctx, req, fmt.Sprint(i))
			eq(t, mustRecv(t, ctx, req), "re:"+fmt.Sprint(i))
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}

func TestZmq4PubSub(t *testing.T) {
	// zmq4 speaks ZMTP 3.0: our SUB must send \x01-prefixed subscription
	// messages, and our PUB must understand them.
	ctx := tctx(t)
	t.Run("our-sub-to-zmq4-pub", func(t *testing.T) {
		z, _ := zsock(t, zmq4.NewPub)
		if err := z.Listen("tcp://127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		sub := mk(t, Sub, Config{})
		if err := sub.Subscribe([]byte("a")); err != nil {
			t.Fatal(err)
		}
		connect(t, sub, "tcp://"+z.Addr().String())
		testutil.WaitFor(t, "subscription", 0, func() bool {
			_ = z.Send(zmq4.NewMsgString("b-no"))
			_ = z.Send(zmq4.NewMsgString("a-yes"))
			m, err := sub.Recv(withTimeout(ctx, 20))
			if err == nil && string(m.Frames[0]) != "a-yes" {
				t.Fatalf("got %q", m.Frames)
			}
			return err == nil
		})
	})
	t.Run("zmq4-sub-to-our-pub", func(t *testing.T) {
		pub := mk(t, Pub, Config{})
		addr := bind(t, pub, "tcp://127.0.0.1:0")
		z, _ := zsock(t, zmq4.NewSub)
		if err := z.SetOption(zmq4.OptionSubscribe, "a"); err != nil {
			t.Fatal(err)
		}
		if err := z.Dial(addr); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, "subscription", 0, func() bool {
			pub.peersMu.Lock()
			defer pub.peersMu.Unlock()
			ps := *pub.peers.Load()
			return len(ps) == 1 && ps[0].subs.match([]byte("a"))
		})
		mustSend(t, ctx, pub, "b-no")
		mustSend(t, ctx, pub, "a-yes")
		m, err := z.Recv()
		if err != nil || string(m.Frames[0]) != "a-yes" {
			t.Fatalf("zmq4 SUB got %q, %v", m.Frames, err)
		}
	})
}
