package socket

import (
	"context"
	"fmt"
	"testing"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/socket/sockettest"
)

// benchPair runs fn for every transport and payload size.
func benchMatrix(b *testing.B, fn func(b *testing.B, ep string, size int)) {
	for _, tr := range sockettest.Transports {
		for _, size := range []int{100, 1024} {
			b.Run(fmt.Sprintf("%s/%d", tr, size), func(b *testing.B) {
				fn(b, sockettest.Endpoint(b, tr), size)
			})
		}
	}
}

func BenchmarkPushPull(b *testing.B) {
	benchMatrix(b, func(b *testing.B, ep string, size int) {
		pull := mk(b, Pull, Config{})
		push := mk(b, Push, Config{})
		connect(b, push, bind(b, pull, ep))
		benchOneWay(b, push, pull, size)
	})
}

func BenchmarkPubSub(b *testing.B) {
	benchMatrix(b, func(b *testing.B, ep string, size int) {
		ctx := context.Background()
		// The benchmark measures throughput: the publisher waits for the
		// subscriber instead of dropping.
		pub := mk(b, Pub, Config{PubNoDrop: true})
		sub := mk(b, Sub, Config{})
		connect(b, sub, bind(b, pub, ep))
		if err := sub.Subscribe(nil); err != nil {
			b.Fatal(err)
		}
		// Wait until the subscription has reached the publisher.
		testutil.WaitFor(b, "subscription", 0, func() bool {
			_ = pub.Send(ctx, NewMsgString("probe"))
			m, err := sub.Recv(withTimeout(ctx, 10))
			return err == nil && string(m.Frames[0]) == "probe"
		})
		for sub.queued() > 0 {
			if _, err := sub.Recv(ctx); err != nil {
				b.Fatal(err)
			}
		}
		benchOneWay(b, pub, sub, size)
		if d := pub.Stats().Dropped; d > 0 {
			b.Fatalf("dropped %d", d)
		}
	})
}

// benchOneWay sends b.N messages of size bytes from snd and receives them
// on rcv.
func benchOneWay(b *testing.B, snd, rcv *Socket, size int) {
	ctx := context.Background()
	payload := make([]byte, size)
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	done := make(chan error, 1)
	go func() {
		for range b.N {
			if _, err := rcv.Recv(ctx); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range b.N {
		if err := snd.Send(ctx, Msg{Frames: [][]byte{payload}}); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

func BenchmarkReqRep(b *testing.B) {
	benchMatrix(b, func(b *testing.B, ep string, size int) {
		ctx := context.Background()
		rep := mk(b, Rep, Config{})
		req := mk(b, Req, Config{})
		connect(b, req, bind(b, rep, ep))
		payload := make([]byte, size)
		b.ReportAllocs()
		b.SetBytes(int64(size))
		b.ResetTimer()
		done := make(chan error, 1)
		go func() {
			for range b.N {
				m, err := rep.Recv(ctx)
				if err == nil {
					err = rep.Send(ctx, m)
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		for range b.N {
			if err := req.Send(ctx, Msg{Frames: [][]byte{payload}}); err != nil {
				b.Fatal(err)
			}
			if _, err := req.Recv(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	})
}
