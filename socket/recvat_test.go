package socket

import (
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/socket/sockettest"
)

// RecvAt says when a message arrived, not when it was taken: a message
// that waited in the receive queue reports a time before the wait.
func TestRecvAtReportsArrival(t *testing.T) {
	for _, k := range []struct{ snd, rcv Kind }{{Push, Pull}, {Dealer, Router}, {Req, Rep}} {
		t.Run(k.rcv.String(), func(t *testing.T) {
			sockettest.Matrix(t, func(t *testing.T, ep func() string) {
				ctx := tctx(t)
				rcv := mk(t, k.rcv, Config{})
				snd := mk(t, k.snd, Config{})
				connect(t, snd, bind(t, rcv, ep()))
				before := time.Now()
				frames := []string{"hello"}
				if k.snd == Dealer {
					frames = []string{"", "hello"}
				}
				mustSend(t, ctx, snd, frames...)
				testutil.WaitFor(t, "the message queued", 0, func() bool { return rcv.queued() == 1 })
				queued := time.Now()
				m, at, err := rcv.RecvAt(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if got := string(m.Frames[len(m.Frames)-1]); got != "hello" {
					t.Fatalf("got %q", m.Frames)
				}
				if at.Before(before) || at.After(queued) {
					t.Fatalf("arrived at %v, want between the send (%v) and when it was seen queued (%v)", at, before, queued)
				}
			})
		})
	}
}
