package socket

import (
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/socket/sockettest"
)

// A receiver that got a message passes its wake-up on to another waiting
// receiver only while messages are left for it: with several receivers
// waiting (an RPC server's), one message wakes one of them, not a second
// that would find nothing.
func TestRecvWakesOneReceiverPerMessage(t *testing.T) {
	sockettest.Matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		router, dealer := routerAndDealer(t, ep(), Config{}, Config{})
		const receivers, n = 4, 200
		var wg sync.WaitGroup
		for range receivers {
			wg.Go(func() {
				for {
					m, err := router.Recv(ctx)
					if err != nil {
						return
					}
					if err := router.Send(ctx, m); err != nil {
						return
					}
				}
			})
		}
		defer wg.Wait()
		defer router.Close()
		for i := range n {
			// Every receiver waits again before the next message comes.
			testutil.WaitFor(t, "receivers waiting", 10*time.Second, func() bool {
				return router.in.blocked.waiting() == receivers
			})
			if i == 0 {
				router.in.blocked.woken.Store(0)
			}
			mustSend(t, ctx, dealer, "x")
			eq(t, mustRecv(t, ctx, dealer), "x")
		}
		// One wake-up per message, and a few for the reader role (a
		// receiver that took it before the others came).
		if w := router.in.blocked.woken.Load(); w > n+n/10 {
			t.Fatalf("%d messages woke receivers %d times", n, w)
		}
	})
}
