package socket_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/fastmq/fastmq/socket"
)

// A PUSH socket distributes messages to PULL sockets.
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pull, err := socket.New(socket.Pull, socket.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer pull.Close()
	addr, err := pull.Bind("tcp://127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	push, err := socket.New(socket.Push, socket.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer push.Close()
	if err := push.Connect(addr); err != nil {
		log.Fatal(err)
	}
	if err := push.Send(ctx, socket.NewMsgString("job", "42")); err != nil {
		log.Fatal(err)
	}
	m, err := pull.Recv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s\n", m.Frames[0], m.Frames[1])
	// Output: job 42
}

// REQ and REP: the REQ socket's envelope is handled for you.
func ExampleSocket_Send() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rep, _ := socket.New(socket.Rep, socket.Config{})
	defer rep.Close()
	req, _ := socket.New(socket.Req, socket.Config{})
	defer req.Close()
	if _, err := rep.Bind("inproc://example-reqrep"); err != nil {
		log.Fatal(err)
	}
	if err := req.Connect("inproc://example-reqrep"); err != nil {
		log.Fatal(err)
	}
	go func() {
		q, err := rep.Recv(ctx)
		if err != nil {
			return
		}
		_ = rep.Send(ctx, socket.NewMsgString("hello "+string(q.Frames[0])))
	}()
	if err := req.Send(ctx, socket.NewMsgString("world")); err != nil {
		log.Fatal(err)
	}
	a, err := req.Recv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(a.Frames[0]))
	// Output: hello world
}

// SUB sockets receive only messages whose first frame starts with a
// subscribed prefix. Subscriptions travel to the publisher asynchronously,
// so a publisher usually waits for its subscribers (here, by watching a
// message come through).
func ExampleSocket_Subscribe() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pub, _ := socket.New(socket.Pub, socket.Config{})
	defer pub.Close()
	sub, _ := socket.New(socket.Sub, socket.Config{})
	defer sub.Close()
	if _, err := pub.Bind("inproc://example-pubsub"); err != nil {
		log.Fatal(err)
	}
	if err := sub.Subscribe([]byte("weather.")); err != nil {
		log.Fatal(err)
	}
	if err := sub.Connect("inproc://example-pubsub"); err != nil {
		log.Fatal(err)
	}
	for ctx.Err() == nil {
		_ = pub.Send(ctx, socket.NewMsgString("sports.football", "3-1"))
		_ = pub.Send(ctx, socket.NewMsgString("weather.paris", "sunny"))
		wait, stop := context.WithTimeout(ctx, 10*time.Millisecond)
		m, err := sub.Recv(wait)
		stop()
		if err == nil {
			fmt.Printf("%s: %s\n", m.Frames[0], m.Frames[1])
			return
		}
	}
	// Output: weather.paris: sunny
}

// Events report connection life cycle without blocking the socket.
func ExampleSocket_Events() {
	s, _ := socket.New(socket.Pull, socket.Config{})
	if _, err := s.Bind("inproc://example-events"); err != nil {
		log.Fatal(err)
	}
	ev := <-s.Events()
	fmt.Println(ev.Type, ev.Endpoint)
	s.Close()
	// Output: listening inproc://example-events
}

// A publisher with PubNoDrop waits for a slow subscriber instead of
// dropping: here a SUB that holds one message at a time still gets all
// 1000, in order.
func ExampleConfig_pubNoDrop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pub, _ := socket.New(socket.Pub, socket.Config{PubNoDrop: true, SendHWM: 1})
	defer pub.Close()
	sub, _ := socket.New(socket.Sub, socket.Config{RecvHWM: 1})
	defer sub.Close()
	if _, err := pub.Bind("inproc://example-nodrop"); err != nil {
		log.Fatal(err)
	}
	if err := sub.Subscribe(nil); err != nil {
		log.Fatal(err)
	}
	if err := sub.Connect("inproc://example-nodrop"); err != nil {
		log.Fatal(err)
	}
	// Slow joiner: publish until the subscription has arrived.
	for ctx.Err() == nil {
		_ = pub.Send(ctx, socket.NewMsgString("hello"))
		wait, stop := context.WithTimeout(ctx, 10*time.Millisecond)
		_, err := sub.Recv(wait)
		stop()
		if err == nil {
			break
		}
	}
	go func() {
		for i := range 1000 {
			if err := pub.Send(ctx, socket.NewMsgString(fmt.Sprint(i))); err != nil {
				log.Fatal(err)
			}
		}
	}()
	next := 0
	for next < 1000 {
		m, err := sub.Recv(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if string(m.Frames[0]) == "hello" {
			continue // left over from the slow-joiner loop
		}
		if string(m.Frames[0]) != fmt.Sprint(next) {
			log.Fatalf("got %s, want %d", m.Frames[0], next)
		}
		next++
	}
	fmt.Println("received", next, "dropped", pub.Stats().Dropped)
	// Output: received 1000 dropped 0
}

// Shutdown writes what is queued before closing, within the caller's
// deadline; Close would linger up to Config.Linger instead.
func ExampleSocket_Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pull, err := socket.New(socket.Pull, socket.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer pull.Close()
	if _, err := pull.Bind("inproc://example-shutdown"); err != nil {
		log.Fatal(err)
	}
	push, err := socket.New(socket.Push, socket.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := push.Connect("inproc://example-shutdown"); err != nil {
		log.Fatal(err)
	}
	for i := range 3 {
		if err := push.Send(ctx, socket.NewMsgString(fmt.Sprint("job ", i))); err != nil {
			log.Fatal(err)
		}
	}
	shutdownCtx, cancelShutdown := context.WithTimeout(ctx, time.Second)
	defer cancelShutdown()
	if err := push.Shutdown(shutdownCtx); err != nil {
		log.Print("not everything was written: ", err)
	}
	for range 3 {
		m, err := pull.Recv(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s\n", m.Frames[0])
	}
	// Output:
	// job 0
	// job 1
	// job 2
}

// RecvAt says when a message arrived, so that a server can count the time
// a request waited in the receive queue against its deadline.
func ExampleSocket_RecvAt() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pull, err := socket.New(socket.Pull, socket.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer pull.Close()
	addr, err := pull.Bind("inproc://example-recvat")
	if err != nil {
		log.Fatal(err)
	}
	push, err := socket.New(socket.Push, socket.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer push.Close()
	if err := push.Connect(addr); err != nil {
		log.Fatal(err)
	}
	if err := push.Send(ctx, socket.NewMsgString("job")); err != nil {
		log.Fatal(err)
	}
	m, arrived, err := pull.RecvAt(ctx)
	if err != nil {
		log.Fatal(err)
	}
	waited := time.Since(arrived) // in the receive queue, before this Recv took it
	fmt.Println(string(m.Frames[0]), waited >= 0)
	// Output: job true
}
