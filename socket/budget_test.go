package socket

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/internal/zmtp"
)

// heapInuse returns the heap in use after a collection.
func heapInuse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// TestEmptyFrameFloodBounded: 20 connections each send 4,096 empty MORE
// frames of one message; each is disconnected at MaxMsgFrames (1024 by
// default) instead of being held until MaxMsgSize/32 frames (2.1 M), and
// the heap does not grow by more than 8 MiB.
func TestEmptyFrameFloodBounded(t *testing.T) {
	pull := mk(t, Pull, Config{})
	addr := bind(t, pull, "tcp://127.0.0.1:0")
	before := heapInuse()
	const conns = 20
	for range conns {
		p := rawConnect(t, addr, "PUSH")
		p.write(t, bytes.Repeat([]byte{zmtp.FlagMore, 0}, 4096))
	}
	testutil.WaitFor(t, "every flooding peer disconnected", 0, func() bool {
		return pull.Stats().TooLarge == conns
	})
	grew := heapInuse() - before
	t.Logf("heap grew %d KiB for %d flooding connections", grew>>10, conns)
	if grew > 8<<20 {
		t.Fatalf("heap grew %d bytes", grew)
	}
}

// TestSubscriptionBytesBounded: a peer's subscriptions are capped in bytes,
// not only in number: 512 KiB subscriptions are refused past
// maxPeerSubBytes (4 MiB) and the peer disconnected.
func TestSubscriptionBytesBounded(t *testing.T) {
	pub := mk(t, Pub, Config{})
	addr := bind(t, pub, "tcp://127.0.0.1:0")
	p := rawConnect(t, addr, "SUB")
	waitEv(t, pub, EventAccepted)
	big := bytes.Repeat([]byte{'s'}, 512<<10)
	go func() {
		for i := range 16 {
			big := append([]byte(fmt.Sprintf("%02d", i)), big...)
			if p.w.WriteCommand(zmtp.CmdSubscribe, big) != nil || p.w.Flush() != nil {
				return // the PUB hung up
			}
		}
	}()
	ev := waitEv(t, pub, EventDisconnected)
	if !errors.Is(ev.Err, errTooManySubs) {
		t.Fatalf("peer dropped with %v, want errTooManySubs", ev.Err)
	}
}

// TestHWMBytesBackpressure: a PULL that never receives holds at most
// RecvHWMBytes (plus one message) of 1 MiB messages, the PUSH at most
// SendHWMBytes, and Send then blocks: with message counts alone (HWM 1000)
// all 200 messages (200 MiB) were taken.
func TestHWMBytesBackpressure(t *testing.T) {
	pull := mk(t, Pull, Config{})
	push := mk(t, Push, Config{})
	connect(t, push, bind(t, pull, "tcp://127.0.0.1:0"))
	waitPeers(t, pull, 1)
	waitPeers(t, push, 1)
	before := heapInuse()
	msg := bytes.Repeat([]byte{'m'}, 1<<20)
	sent, blocked := 0, false
	for sent < 200 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := push.Send(ctx, NewMsg(msg))
		cancel()
		if err != nil {
			if !isTimeout(err) {
				t.Fatal(err)
			}
			blocked = true
			break
		}
		sent++
	}
	if !blocked {
		t.Fatalf("all %d messages of 1 MiB were queued: no byte bound", sent)
	}
	in := (*pull.peers.Load())[0].inq.size()
	oq := (*push.peers.Load())[0].outq
	oq.mu.Lock()
	out := oq.bytes
	oq.mu.Unlock()
	grew := heapInuse() - before
	t.Logf("%d sends before blocking; receive queue %d KiB, send queue %d KiB; heap grew %d MiB", sent, in>>10, out>>10, grew>>20)
	limit := int64(DefaultHWMBytes + 1<<20 + 2*FrameOverhead)
	if in > limit || out > limit {
		t.Fatalf("queues hold %d and %d bytes, over %d", in, out, limit)
	}
	// Received in full once the PULL reads.
	ctx := tctx(t)
	for range sent {
		if _, err := pull.Recv(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSendHWMBytesTotal: a ROUTER with SendHWMBytesTotal drops what would
// take the bytes queued for all its peers past it, whatever the peers'
// own bounds allow, and gives the budget back when they go.
func TestSendHWMBytesTotal(t *testing.T) {
	r := mk(t, Router, Config{SendHWMBytesTotal: 4 << 20})
	addr := bind(t, r, "tcp://127.0.0.1:0")
	var ids [][]byte
	for i := range 4 {
		p := rawDial(t, addr)
		// Peers that never read: a tiny receive buffer stalls the writer.
		_ = p.c.(*net.TCPConn).SetReadBuffer(4 << 10)
		_ = p.c.SetDeadline(time.Now().Add(5 * time.Second))
		id := []byte(fmt.Sprintf("peer-%d", i))
		if _, err := zmtp.Handshake(p.r, p.w, zmtp.Config{SocketType: "DEALER", Identity: id}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		defer p.c.Close()
	}
	waitPeers(t, r, 4)
	ctx := tctx(t)
	body := bytes.Repeat([]byte{'b'}, 256<<10)
	for range 20 {
		for _, id := range ids {
			if err := r.Send(ctx, NewMsg(id, body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	q := r.queuedBytes.Load()
	t.Logf("queued for 4 stalled peers: %d KiB; dropped %d", q>>10, r.Stats().Dropped)
	if q > 4<<20 {
		t.Fatalf("%d bytes queued, over the 4 MiB total", q)
	}
	if r.Stats().Dropped == 0 {
		t.Fatal("nothing dropped")
	}
}

// TestSlowlorisGoodPeersGetIn: while 300 silent connections from ten
// source addresses are held open (each redialed as soon as the socket
// drops it), every one of 20 good peers, dialing once each, completes its
// handshake; with a global handshake cap and no eviction the good peers
// were refused (10 of 11 tries failed).
func TestSlowlorisGoodPeersGetIn(t *testing.T) {
	pull := mk(t, Pull, Config{HandshakeTimeout: 5 * time.Second})
	addr := strings.TrimPrefix(bind(t, pull, "tcp://127.0.0.1:0"), "tcp://")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	var held sync.WaitGroup
	held.Add(300)
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%10))}, Timeout: time.Second}
			first := true
			for {
				c, err := d.Dial("tcp", addr)
				if err == nil {
					if first {
						held.Done()
						first = false
					}
					done := make(chan struct{})
					go func() { // hold it until the socket drops it
						var b [64]byte
						for {
							if _, err := c.Read(b[:]); err != nil {
								close(done)
								return
							}
						}
					}()
					select {
					case <-done:
						c.Close()
						continue
					case <-stop:
						c.Close()
						<-done
						return
					}
				}
				select {
				case <-stop:
					if first {
						held.Done()
					}
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}()
	}
	held.Wait()
	testutil.WaitFor(t, "every handshake slot taken", 0, func() bool {
		pull.mu.Lock()
		defer pull.mu.Unlock()
		return len(pull.pending) >= maxPendingHandshakes
	})
	var slowest time.Duration
	defer func() { t.Logf("slowest good handshake during the attack: %v", slowest) }()
	for i := range 20 {
		start := time.Now()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(100+i%5))}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := zmtp.Handshake(zmtp.NewReader(c, 0), zmtp.NewWriter(c, 0), zmtp.Config{SocketType: "PUSH"}); err != nil {
			c.Close()
			t.Fatalf("good peer %d: handshake failed during the attack: %v", i, err)
		}
		slowest = max(slowest, time.Since(start))
		c.Close()
	}
}

// TestPlainFailuresLockOut: after maxAuthFailures wrong PLAIN passwords
// from one address, that address is refused even with the right
// password, while another address still gets in.
func TestPlainFailuresLockOut(t *testing.T) {
	srv := mk(t, Pull, Config{PlainAuth: func(u, p string) bool { return u == "u" && p == "right" }})
	addr := strings.TrimPrefix(bind(t, srv, "tcp://127.0.0.1:0"), "tcp://")
	try := func(src byte, pass string) error {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, src)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = zmtp.Handshake(zmtp.NewReader(c, 0), zmtp.NewWriter(c, 0), zmtp.Config{SocketType: "PUSH", Username: "u", Password: pass})
		return err
	}
	for i := range maxAuthFailures {
		if err := try(3, "wrong"); !errors.Is(err, zmtp.ErrPeerError) {
			t.Fatalf("guess %d: %v, want the server's ERROR", i, err)
		}
	}
	if err := try(3, "right"); err == nil {
		t.Fatal("locked-out address got in")
	}
	if err := try(4, "right"); err != nil {
		t.Fatalf("another address refused: %v", err)
	}
	var refused bool
	for !refused {
		ev := waitEv(t, srv, EventHandshakeFailed)
		refused = errors.Is(ev.Err, ErrRefused)
	}
}

// TestMaxConnsPerSource: past MaxConnsPerSource established connections
// from one address, another from it is refused while other addresses
// still get in, and a slot frees when a connection ends.
func TestMaxConnsPerSource(t *testing.T) {
	pull := mk(t, Pull, Config{MaxConnsPerSource: 2, MaxConns: 3})
	addr := strings.TrimPrefix(bind(t, pull, "tcp://127.0.0.1:0"), "tcp://")
	dial := func(src byte) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, src)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = zmtp.Handshake(zmtp.NewReader(c, 0), zmtp.NewWriter(c, 0), zmtp.Config{SocketType: "PUSH"})
		return c, err
	}
	a1, err1 := dial(5)
	_, err2 := dial(5)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	waitPeers(t, pull, 2)
	if _, err := dial(5); err == nil {
		t.Fatal("third connection from one address got in")
	}
	if _, err := dial(6); err != nil {
		t.Fatalf("other address refused: %v", err)
	}
	waitPeers(t, pull, 3)
	if _, err := dial(7); err == nil {
		t.Fatal("connection past MaxConns got in")
	}
	a1.Close()
	waitPeers(t, pull, 2)
	testutil.WaitFor(t, "slot freed", 0, func() bool {
		pull.mu.Lock()
		defer pull.mu.Unlock()
		return pull.accepted == 2
	})
	if _, err := dial(5); err != nil {
		t.Fatalf("freed slot refused: %v", err)
	}
}

// TestRepEchoToPeerThatNeverReads: a raw DEALER pipelines 30 requests of
// 8 MiB to a REP that echoes them and never reads the replies. The REP's
// Send blocks once the peer's send queue holds SendHWMBytes, its reader
// then stops at RecvHWMBytes, and the process heap grows by less than
// 100 MiB; with message counts alone every request and reply was held
// (30 x 8 MiB, 240 MiB).
func TestRepEchoToPeerThatNeverReads(t *testing.T) {
	rep := mk(t, Rep, Config{})
	addr := bind(t, rep, "tcp://127.0.0.1:0")
	before := heapInuse()
	p := rawDial(t, addr)
	_ = p.c.(*net.TCPConn).SetReadBuffer(4 << 10)
	_ = p.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := zmtp.Handshake(p.r, p.w, zmtp.Config{SocketType: "DEALER"}); err != nil {
		t.Fatal(err)
	}
	_ = p.c.SetDeadline(time.Time{})

	var mu sync.Mutex
	echoed, sending := 0, false
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	go func() {
		defer close(done)
		for {
			m, err := rep.Recv(ctx)
			if err != nil {
				return
			}
			mu.Lock()
			sending = true
			mu.Unlock()
			if rep.Send(ctx, m) != nil {
				return
			}
			mu.Lock()
			sending = false
			echoed++
			mu.Unlock()
		}
	}()
	go func() {
		body := bytes.Repeat([]byte{'r'}, 8<<20)
		for range 30 {
			if p.w.WriteMessage([][]byte{{}, body}) != nil || p.w.Flush() != nil {
				return
			}
		}
	}()
	testutil.WaitFor(t, "REP blocked in Send and its reader stopped, or all echoed", 0, func() bool {
		mu.Lock()
		defer mu.Unlock()
		if echoed == 30 {
			return true
		}
		if !sending {
			return false
		}
		ps := *rep.peers.Load()
		if len(ps) != 1 || ps[0].outq.hasRoom(8<<20) {
			return false
		}
		q := ps[0].inq
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.waiting // the reader stopped too
	})
	grew := heapInuse() - before
	mu.Lock()
	n := echoed
	mu.Unlock()
	t.Logf("REP echoed %d of 30 requests of 8 MiB; heap grew %d MiB", n, grew>>20)
	if grew > 100<<20 {
		t.Fatalf("heap grew %d bytes", grew)
	}
}
