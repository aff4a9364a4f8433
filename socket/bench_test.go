package socket

import (
	"context"
	"fmt"
	"testing"

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
		ctx := context.Background()
		pull := mk(b, Pull, Config{})
		push := mk(b, Push, Config{})
		connect(b, push, bind(b, pull, ep))
		payload := make([]byte, size)
		b.ReportAllocs()
		b.SetBytes(int64(size))
		b.ResetTimer()
		done := make(chan error, 1)
		go func() {
			for range b.N {
				if _, err := pull.Recv(ctx); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		for range b.N {
			if err := push.Send(ctx, Msg{Frames: [][]byte{payload}}); err != nil {
				b.Fatal(err)
			}
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkPubSub(b *testing.B) {
	benchMatrix(b, func(b *testing.B, ep string, size int) {
		ctx := context.Background()
		// A large HWM keeps a fast publisher from dropping: the benchmark
		// measures throughput, so the publisher waits for room instead.
		pub := mk(b, Pub, Config{SendHWM: 1 << 16})
		sub := mk(b, Sub, Config{})
		connect(b, sub, bind(b, pub, ep))
		if err := sub.Subscribe(nil); err != nil {
			b.Fatal(err)
		}
		waitPeers(b, pub, 1)
		// Wait until the subscription has reached the publisher.
		waitFor(b, "subscription", func() bool {
			_ = pub.Send(ctx, NewMsgString("probe"))
			m, err := sub.Recv(withTimeout(ctx, 10))
			return err == nil && string(m.Frames[0]) == "probe"
		})
		payload := make([]byte, size)
		b.ReportAllocs()
		b.SetBytes(int64(size))
		b.ResetTimer()
		done := make(chan error, 1)
		go func() {
			for range b.N {
				if _, err := sub.Recv(ctx); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		for i := range b.N {
			if err := pub.Send(ctx, Msg{Frames: [][]byte{payload}}); err != nil {
				b.Fatal(err)
			}
			if i%1000 == 999 {
				// Pace the publisher so the subscriber's queue bounds hold.
				for pub.Stats().Sent-sub.Stats().Received > 20000 {
					runtimeGosched()
				}
			}
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		if d := pub.Stats().Dropped; d > 0 {
			b.Fatalf("dropped %d", d)
		}
	})
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
