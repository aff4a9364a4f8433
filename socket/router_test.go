package socket

import (
	"context"
	"runtime"
	"testing"
)

// A ROUTER returns the sender's identity as Frames[0] without an
// allocation per message (its reader puts the identity in a slot it keeps
// before the frames), and each message's identity frame is its own:
// changing one leaves the next intact.
func TestRouterRecvIdentity(t *testing.T) {
	ctx := tctx(t)
	r := mk(t, Router, Config{})
	d := mk(t, Dealer, Config{Identity: []byte("d1")})
	connect(t, d, bind(t, r, "tcp://127.0.0.1:0"))
	mustSend(t, ctx, d, "", "m")
	m1, err := r.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, msgStrings(m1), "d1", "", "m")
	m1.Frames[0][0] = 'X'
	m1.Frames[0] = append(m1.Frames[0], "more"...)
	mustSend(t, ctx, d, "", "m")
	eq(t, mustRecv(t, ctx, r), "d1", "", "m")

	// Allocations per message, sending included: the same message each
	// time, and the socket's blocks (read buffers, frame slices,
	// identities) shared by many messages.
	const n = 2000
	msg := NewMsgString("", "m")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		if err := d.Send(ctx, msg); err != nil {
			t.Fatal(err)
		}
		m, err := r.Recv(context.Background())
		if err != nil || string(m.Frames[0]) != "d1" {
			t.Fatalf("recv: %q %v", m.Frames, err)
		}
	}
	runtime.ReadMemStats(&after)
	per := float64(after.Mallocs-before.Mallocs) / n
	t.Logf("%.2f allocations per message", per)
	if per >= 1 {
		t.Fatalf("%.2f allocations per message sent to and received by a ROUTER, want less than one", per)
	}
}

func msgStrings(m Msg) []string {
	out := make([]string, len(m.Frames))
	for i, f := range m.Frames {
		out[i] = string(f)
	}
	return out
}
