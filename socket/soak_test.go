package socket

import (
	"context"
	"encoding/binary"
	"flag"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/socket/sockettest"
)

var soakFor = flag.Duration("soak", 0, "how long TestSoakChurn sends per transport (0: 1s, or 20s with FASTMQ_LONG=1)")

// soakMsgSize is the size of TestSoakChurn's messages: large enough that
// what the transport buffers is a few dozen messages, not thousands.
const soakMsgSize = 64 << 10

// TestSoakChurn sends from a PUSH to three PULLs that are closed and
// replaced again and again (heartbeats on, reconnecting within
// milliseconds), and checks the delivery PUSH promises: at most once, and
// messages are lost only with a connection that ends (those queued for it
// are discarded). So:
//
//   - no message arrives twice, and none arrives that was not sent;
//   - sent - received <= disconnects * perConn + dropped, where
//     disconnects is the PUSH's Stats.Disconnects, dropped what the
//     PULLs still open at the end counted in Stats.Dropped, and perConn
//     the most one connection can hold when it ends: its send queue and
//     the batch its writer took (2 * SendHWM), the PULL's receive queue
//     with its reader's batch (RecvHWM), and what the transport and the
//     two ZMTP buffers hold, in messages (inproc: its in-memory buffer;
//     tcp and ipc: the kernel's largest send and receive buffers);
//   - when the churn stops, Shutdown with time left delivers everything
//     queued for the PULLs still connected (it returns nil).
//
// It runs 1s per transport by default; -soak=30s or FASTMQ_LONG=1 (20s)
// make it longer.
func TestSoakChurn(t *testing.T) {
	d := *soakFor
	if d == 0 {
		d = time.Second
		if os.Getenv("FASTMQ_LONG") != "" {
			d = 20 * time.Second
		}
	}
	for _, tr := range []string{"inproc", "ipc", "tcp"} {
		t.Run(tr, func(t *testing.T) { soakChurn(t, tr, d) })
	}
}

func soakChurn(t *testing.T, tr string, d time.Duration) {
	const (
		sendHWM, recvHWM = 16, 16
		churnEvery       = 1000 // messages between two closes
		zmtpBufs         = 2 * 64 << 10
	)
	buffered := transportBuffer(t, tr) + zmtpBufs
	perConn := 2*sendHWM + recvHWM + (buffered+soakMsgSize-1)/soakMsgSize + 2

	ctx := tctx(t)
	hb := Config{HeartbeatInterval: 10 * time.Millisecond, HeartbeatTimeout: 5 * time.Second}
	pushCfg := hb
	pushCfg.SendHWM = sendHWM
	pushCfg.Linger = time.Minute // only Shutdown's ctx bounds the final flush
	pushCfg.ReconnectInterval = time.Millisecond
	pushCfg.ReconnectIntervalMax = 10 * time.Millisecond
	push := mk(t, Push, pushCfg)
	pullCfg := hb
	pullCfg.RecvHWM = recvHWM

	var (
		mu       sync.Mutex
		seen     = map[uint64]int{}
		received int
		bad      []string
	)
	record := func(m Msg) {
		mu.Lock()
		defer mu.Unlock()
		if len(m.Frames) != 2 || len(m.Frames[0]) != 8 || len(m.Frames[1]) != soakMsgSize {
			bad = append(bad, m.String()[:min(len(m.String()), 40)])
			return
		}
		seq := binary.BigEndian.Uint64(m.Frames[0])
		seen[seq]++
		received++
	}
	recvCtx, stopRecv := context.WithCancel(ctx)
	defer stopRecv()
	var wg sync.WaitGroup
	start := func(p *Socket) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := p.Recv(recvCtx)
				if err != nil {
					return // closed, or the test stops receiving
				}
				record(m)
			}
		}()
	}
	var addrs []string
	var pulls []*Socket
	for range 3 {
		p := mk(t, Pull, pullCfg)
		addrs = append(addrs, bind(t, p, sockettest.Endpoint(t, tr)))
		pulls = append(pulls, p)
		connect(t, push, addrs[len(addrs)-1])
		start(p)
	}

	body := make([]byte, soakMsgSize)
	var sent uint64
	closes := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		if err := push.Send(ctx, NewMsg(binary.BigEndian.AppendUint64(nil, sent), body)); err != nil {
			t.Fatalf("send %d: %v", sent, err)
		}
		sent++
		if sent%churnEvery == 0 {
			i := closes % len(pulls)
			closes++
			pulls[i].Close()
			p := mk(t, Pull, pullCfg)
			bind(t, p, addrs[i])
			pulls[i] = p
			start(p)
		}
	}
	// Once every PULL open now is connected, each of the PUSH's three
	// dialers has ended (and counted) its connection to a closed one.
	testutil.WaitFor(t, "every PULL connected", 0, func() bool {
		for _, p := range pulls {
			if p.Stats().Peers != 1 {
				return false
			}
		}
		return true
	})
	disconnects := push.Stats().Disconnects

	// Deliver what is still queued, then take what the PULLs hold.
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := push.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown with time left: %v", err)
	}
	stopRecv()
	wg.Wait()
	// The PULLs saw their connection end: what it brought waits for Recv.
	testutil.WaitFor(t, "PULLs without peers", 0, func() bool {
		for _, p := range pulls {
			if p.Stats().Peers != 0 {
				return false
			}
		}
		return true
	})
	var dropped uint64
	for _, p := range pulls {
		for {
			m, err := p.Recv(recvCtx) // ended: takes only what is queued
			if err != nil {
				break
			}
			record(m)
		}
		p.Close()
		dropped += p.Stats().Dropped
	}

	if len(bad) > 0 {
		t.Fatalf("%d malformed messages, first %s", len(bad), bad[0])
	}
	for seq, n := range seen {
		if seq >= sent {
			t.Fatalf("message %d received, only %d sent", seq, sent)
		}
		if n > 1 {
			t.Fatalf("message %d received %d times", seq, n)
		}
	}
	lost := sent - uint64(received)
	bound := disconnects*uint64(perConn) + dropped
	t.Logf("%s: sent %d, received %d, lost %d (bound %d: %d disconnects of at most %d, %d dropped), %d closes",
		tr, sent, received, lost, bound, disconnects, perConn, dropped, closes)
	if lost > bound {
		t.Fatalf("lost %d messages, more than %d disconnects can lose (%d each) plus %d dropped", lost, disconnects, perConn, dropped)
	}
	if closes > 0 && disconnects == 0 {
		t.Fatalf("%d PULLs closed, no disconnect seen", closes)
	}
}

// transportBuffer returns the most bytes transport tr can hold between the
// writer's and the reader's ZMTP buffers.
func transportBuffer(t *testing.T, tr string) int {
	t.Helper()
	switch tr {
	case "inproc":
		return memBuf
	case "tcp":
		return procMax(t, "/proc/sys/net/ipv4/tcp_wmem") + procMax(t, "/proc/sys/net/ipv4/tcp_rmem")
	default: // unix sockets: buffers up to the core limits
		return procMax(t, "/proc/sys/net/core/wmem_max") + procMax(t, "/proc/sys/net/core/rmem_max")
	}
}

// procMax reads the last number of a /proc/sys file (the maximum of
// tcp_wmem's "min default max").
func procMax(t *testing.T, name string) int {
	b, err := os.ReadFile(name)
	if err != nil {
		t.Skipf("no kernel buffer size to bound the loss: %v", err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		t.Skipf("no kernel buffer size in %s", name)
	}
	n, err := strconv.Atoi(f[len(f)-1])
	if err != nil {
		t.Skipf("no kernel buffer size in %s: %q", name, b)
	}
	return n
}
