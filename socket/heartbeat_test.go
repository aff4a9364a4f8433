package socket

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/zmtp"
)

func TestHeartbeatDeadPeer(t *testing.T) {
	// Our heartbeats: a peer that completes the handshake and then never
	// answers PINGs is disconnected.
	pull := mk(t, Pull, Config{HeartbeatInterval: 20 * time.Millisecond, HeartbeatTimeout: 60 * time.Millisecond})
	addr := bind(t, pull, "tcp://127.0.0.1:0")
	p := rawConnect(t, addr, "PUSH")
	waitEv(t, pull, EventAccepted)
	ev := waitEv(t, pull, EventDisconnected)
	if !errors.Is(ev.Err, errHeartbeat) {
		t.Fatalf("disconnect reason %v, want heartbeat timeout", ev.Err)
	}
	// The silent peer did receive PINGs.
	_ = p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, cmd, err := p.r.Next(nil)
	if err != nil || cmd.Name != zmtp.CmdPing {
		t.Fatalf("raw peer read %q, %v; want PING", cmd.Name, err)
	}

	// The peer's TTL: without heartbeats of our own, a peer announcing a
	// TTL of 100ms and then going silent is disconnected.
	pull2 := mk(t, Pull, Config{})
	addr2 := bind(t, pull2, "tcp://127.0.0.1:0")
	p2 := rawConnect(t, addr2, "PUSH")
	waitEv(t, pull2, EventAccepted)
	if err := p2.w.WriteCommand(zmtp.CmdPing, zmtp.AppendPing(nil, 1, []byte("ctx"))); err != nil {
		t.Fatal(err)
	}
	if err := p2.w.WriteMessage([][]byte{[]byte("after-ping")}); err != nil {
		t.Fatal(err)
	}
	if err := p2.w.Flush(); err != nil {
		t.Fatal(err)
	}
	// PING is answered with PONG echoing the context, and never reaches
	// the application.
	_ = p2.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, cmd, err = p2.r.Next(nil)
	if err != nil || cmd.Name != zmtp.CmdPong || string(cmd.Body) != "ctx" {
		t.Fatalf("raw peer read %q %q, %v; want PONG ctx", cmd.Name, cmd.Body, err)
	}
	eq(t, mustRecv(t, tctx(t), pull2), "after-ping")
	ev = waitEv(t, pull2, EventDisconnected)
	if !errors.Is(ev.Err, errHeartbeat) {
		t.Fatalf("disconnect reason %v, want heartbeat timeout", ev.Err)
	}

	// Two of our sockets with heartbeats stay connected while idle.
	// (Generous timeouts: a loaded CI machine must not look like a dead
	// peer.)
	a := mk(t, Pair, Config{HeartbeatInterval: 20 * time.Millisecond, HeartbeatTimeout: 300 * time.Millisecond, HeartbeatTTL: time.Second})
	b := mk(t, Pair, Config{HeartbeatInterval: 20 * time.Millisecond, HeartbeatTimeout: 300 * time.Millisecond})
	connect(t, b, bind(t, a, "tcp://127.0.0.1:0"))
	waitPeers(t, a, 1)
	ctx := tctx(t)
	for i := range 2 {
		// Idle for a while (longer than interval + timeout), waiting on
		// Recv.
		if _, err := a.Recv(withTimeout(ctx, 500)); !isTimeout(err) {
			t.Fatalf("Recv on idle PAIR: %v", err)
		}
		mustSend(t, ctx, b, fmt.Sprint(i))
		eq(t, mustRecv(t, ctx, a), fmt.Sprint(i))
	}
	if st := a.Stats(); st.Disconnects != 0 {
		t.Fatalf("idle heartbeating peers disconnected: %+v", st)
	}
}

func TestHeartbeatLiveness(t *testing.T) {
	ctx := tctx(t)
	pull := mk(t, Pull, Config{HeartbeatInterval: 10 * time.Millisecond, HeartbeatTimeout: 200 * time.Millisecond})
	addr := bind(t, pull, "tcp://127.0.0.1:0")

	// A ZMTP 3.0 peer knows no PING: it is neither pinged nor timed out.
	old := rawDial(t, addr)
	_ = old.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := zmtp.Handshake(old.r, old.w, zmtp.Config{SocketType: "PUSH", ZMTP30: true}); err != nil {
		t.Fatal(err)
	}
	_ = old.c.SetDeadline(time.Time{})

	// A 3.1 peer that never answers PINGs but keeps sending data stays:
	// any traffic counts.
	busy := rawConnect(t, addr, "PUSH")
	waitPeers(t, pull, 2)
	for i := range 30 {
		if err := busy.w.WriteMessage([][]byte{[]byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
		if err := busy.w.Flush(); err != nil {
			t.Fatal(err)
		}
		// Paced: 30 messages over about three heartbeat timeouts.
		eq(t, mustRecv(t, ctx, pull), fmt.Sprint(i))
		if _, err := pull.Recv(withTimeout(ctx, 20)); !isTimeout(err) {
			t.Fatalf("unexpected: %v", err)
		}
	}
	if st := pull.Stats(); st.Disconnects != 0 || st.Peers != 2 {
		t.Fatalf("stats %+v", st)
	}
	// The 3.0 peer got no PING: nothing is readable.
	_ = old.c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, _, err := old.r.Next(nil); err == nil {
		t.Fatal("ZMTP 3.0 peer received traffic")
	}
}

// TestPeerTTLCannotLiftOurTimeout: a peer that announces a huge TTL in a
// PING and then goes silent is still dropped by our own heartbeat timeout.
func TestPeerTTLCannotLiftOurTimeout(t *testing.T) {
	pull := mk(t, Pull, Config{HeartbeatInterval: 20 * time.Millisecond, HeartbeatTimeout: 60 * time.Millisecond})
	addr := bind(t, pull, "tcp://127.0.0.1:0")
	p := rawConnect(t, addr, "PUSH")
	waitEv(t, pull, EventAccepted)
	if err := p.w.WriteCommand(zmtp.CmdPing, zmtp.AppendPing(nil, 65535, nil)); err != nil {
		t.Fatal(err)
	}
	if err := p.w.Flush(); err != nil {
		t.Fatal(err)
	}
	ev := waitEv(t, pull, EventDisconnected)
	if !errors.Is(ev.Err, errHeartbeat) {
		t.Fatalf("disconnect reason %v, want heartbeat timeout", ev.Err)
	}
}
