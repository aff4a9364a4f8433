package socket

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/internal/zmtp"
	"github.com/fastmq/fastmq/socket/sockettest"
)

// readingDirectly reports whether a Recv on s reads a connection itself
// now.
func readingDirectly(s *Socket) bool {
	p := s.in.direct.Load()
	return p != nil && p.role.Load() == roleCaller
}

// recvAsync runs Recv(ctx) on s in a goroutine and returns where its
// result comes.
type recvResult struct {
	frames []string
	err    error
}

func recvAsync(ctx context.Context, s *Socket) <-chan recvResult {
	ch := make(chan recvResult, 1)
	go func() {
		m, err := s.Recv(ctx)
		var f []string
		for _, b := range m.Frames {
			f = append(f, string(b))
		}
		ch <- recvResult{f, err}
	}()
	return ch
}

// recvWaiting receives on s with a Recv that waits before the message
// is sent (send): over tcp and ipc it reads the connection itself; it
// returns the frames. A Recv called after the message came finds it
// queued by the reader goroutine, so a test that counts direct reads
// makes each Recv wait first.
func recvWaiting(t *testing.T, ctx context.Context, s *Socket, inproc bool, send func()) []string {
	t.Helper()
	got := recvAsync(ctx, s)
	if inproc {
		testutil.WaitFor(t, "a Recv waiting", 0, func() bool { return s.in.waiting.Load() == 1 })
	} else {
		testutil.WaitFor(t, "a Recv reading the connection", 0, func() bool { return readingDirectly(s) })
	}
	send()
	res := <-got
	if res.err != nil {
		t.Fatal(res.err)
	}
	return res.frames
}

// A Recv on a REQ, REP, DEALER or ROUTER with a single peer reads the
// connection itself (tcp and ipc): the messages of a round trip are not
// handed from the reader goroutine to the receiver.
func TestRecvReadsConnectionItself(t *testing.T) {
	for _, k := range []struct{ a, b Kind }{{Req, Rep}, {Dealer, Router}} {
		t.Run(k.b.String(), func(t *testing.T) {
			sockettest.Matrix(t, func(t *testing.T, ep func() string) {
				ctx := tctx(t)
				b := mk(t, k.b, Config{})
				a := mk(t, k.a, Config{})
				e := ep()
				inproc := strings.HasPrefix(e, "inproc://")
				connect(t, a, bind(t, b, e))
				const n = 20
				for i := range n {
					req := fmt.Sprint("ping", i)
					if k.a == Dealer {
						m := recvWaiting(t, ctx, b, inproc, func() { mustSend(t, ctx, a, "", req) })
						eq(t, m[1:], "", req)
						eq(t, recvWaiting(t, ctx, a, inproc, func() { mustSend(t, ctx, b, m[0], "", "pong") }), "", "pong")
						continue
					}
					eq(t, recvWaiting(t, ctx, b, inproc, func() { mustSend(t, ctx, a, req) }), req)
					eq(t, recvWaiting(t, ctx, a, inproc, func() { mustSend(t, ctx, b, "pong") }), "pong")
				}
				da, db := a.st.directRecv.Load(), b.st.directRecv.Load()
				if inproc {
					if da+db != 0 {
						t.Fatalf("inproc: %d and %d messages read by Recv, want 0", da, db)
					}
					return
				}
				if da != n || db != n {
					t.Fatalf("Recv read %d of %d replies and %d of %d requests itself", da, n, db, n)
				}
			})
		})
	}
}

// With a Recv reading the one peer's connection, a second peer that
// connects and sends is heard: the Recv gives the connection back to its
// reader goroutine and fair-queues.
func TestDirectRecvSecondPeer(t *testing.T) {
	for _, tr := range []string{"tcp", "ipc"} {
		t.Run(tr, func(t *testing.T) {
			ctx := tctx(t)
			rep := mk(t, Rep, Config{})
			ep := bind(t, rep, sockettest.Endpoint(t, tr))
			r1 := mk(t, Req, Config{})
			connect(t, r1, ep)
			waitPeers(t, rep, 1)
			got := recvAsync(ctx, rep)
			testutil.WaitFor(t, "a Recv reading the connection", 0, func() bool { return readingDirectly(rep) })
			r2 := mk(t, Req, Config{})
			connect(t, r2, ep)
			mustSend(t, ctx, r2, "from-2")
			res := <-got
			if res.err != nil {
				t.Fatal(res.err)
			}
			eq(t, res.frames, "from-2")
			mustSend(t, ctx, rep, "re-2")
			eq(t, mustRecv(t, ctx, r2), "re-2")
			// Both peers are served from now on.
			for i := range 5 {
				for _, r := range []*Socket{r1, r2} {
					mustSend(t, ctx, r, fmt.Sprint(i))
					eq(t, mustRecv(t, ctx, rep), fmt.Sprint(i))
					mustSend(t, ctx, rep, "re")
					eq(t, mustRecv(t, ctx, r), "re")
				}
			}
		})
	}
}

// Close, a ctx that ends and a peer that goes away each end a Recv that
// reads the connection itself; what the peer sends afterwards arrives
// whole.
func TestDirectRecvEnds(t *testing.T) {
	for _, tr := range []string{"tcp", "ipc"} {
		t.Run(tr, func(t *testing.T) {
			ctx := tctx(t)
			rep := mk(t, Rep, Config{})
			ep := bind(t, rep, sockettest.Endpoint(t, tr))
			req := mk(t, Req, Config{})
			connect(t, req, ep)
			waitPeers(t, rep, 1)

			// A ctx that ends.
			c, cancel := context.WithCancel(ctx)
			got := recvAsync(c, rep)
			testutil.WaitFor(t, "a Recv reading the connection", 0, func() bool { return readingDirectly(rep) })
			cancel()
			if res := <-got; !errors.Is(res.err, context.Canceled) {
				t.Fatalf("Recv after cancel: %v", res.err)
			}
			mustSend(t, ctx, req, "after-cancel")
			eq(t, mustRecv(t, ctx, rep), "after-cancel")
			mustSend(t, ctx, rep, "re")
			eq(t, mustRecv(t, ctx, req), "re")

			// A peer that goes away: the Recv waits on, and gets what
			// the next peer sends.
			got = recvAsync(ctx, rep)
			testutil.WaitFor(t, "a Recv reading the connection", 0, func() bool { return readingDirectly(rep) })
			before := rep.Stats().Disconnects
			req.Close()
			testutil.WaitFor(t, "the disconnect", 0, func() bool { return rep.Stats().Disconnects > before })
			req2 := mk(t, Req, Config{})
			connect(t, req2, ep)
			mustSend(t, ctx, req2, "from-next")
			if res := <-got; res.err != nil {
				t.Fatal(res.err)
			} else {
				eq(t, res.frames, "from-next")
			}
			mustSend(t, ctx, rep, "re")
			eq(t, mustRecv(t, ctx, req2), "re")

			// Close.
			got = recvAsync(ctx, rep)
			testutil.WaitFor(t, "a Recv reading the connection", 0, func() bool { return readingDirectly(rep) })
			rep.Close()
			if res := <-got; !errors.Is(res.err, ErrClosed) {
				t.Fatalf("Recv after Close: %v", res.err)
			}
		})
	}
}

// A message larger than the read buffer, and one that arrives in parts,
// come whole to a Recv reading the connection, even if the Recv is asked
// to stop (a kick) in the middle of one.
func TestDirectRecvLargeAndSplit(t *testing.T) {
	ctx := tctx(t)
	rep := mk(t, Rep, Config{})
	ep := bind(t, rep, "tcp://127.0.0.1:0")
	req := mk(t, Req, Config{})
	connect(t, req, ep)
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	got := recvAsync(ctx, rep)
	testutil.WaitFor(t, "a Recv reading the connection", 0, func() bool { return readingDirectly(rep) })
	mustSend(t, ctx, req, big, "tail")
	if res := <-got; res.err != nil {
		t.Fatal(res.err)
	} else {
		eq(t, res.frames, big, "tail")
	}
	got = recvAsync(ctx, req)
	testutil.WaitFor(t, "a Recv reading the connection", 0, func() bool { return readingDirectly(req) })
	mustSend(t, ctx, rep, big)
	if res := <-got; res.err != nil {
		t.Fatal(res.err)
	} else {
		eq(t, res.frames, big)
	}
	if rep.st.directRecv.Load() != 1 || req.st.directRecv.Load() != 1 {
		t.Fatalf("large messages read by Recv: %d, %d; want 1, 1", rep.st.directRecv.Load(), req.st.directRecv.Load())
	}
	req.Close()
	waitPeers(t, rep, 0)

	// A raw peer sends half a message, then a kick, then the rest.
	p := rawConnect(t, ep, "REQ")
	waitPeers(t, rep, 1)
	got = recvAsync(ctx, rep)
	testutil.WaitFor(t, "a Recv reading the connection", 0, func() bool { return readingDirectly(rep) })
	var buf bytes.Buffer
	w := zmtp.NewWriter(&buf, 0)
	if err := w.WriteMessage([][]byte{{}, []byte("split-" + strings.Repeat("x", 300))}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	msg := buf.Bytes()
	half := len(msg) / 2
	rp := (*rep.peers.Load())[0]
	base := rp.rd.got.Load()
	p.write(t, msg[:half])
	testutil.WaitFor(t, "the half read", 0, func() bool { return rp.rd.got.Load() == base+int64(half) })
	for range 3 {
		rp.kick()
	}
	p.write(t, msg[half:])
	res := <-got
	if res.err != nil {
		t.Fatal(res.err)
	}
	eq(t, res.frames, "split-"+strings.Repeat("x", 300))
	if d := rep.st.directRecv.Load(); d != 2 {
		t.Fatalf("REP's Recv read %d messages itself, want 2 (the kicks inside a message do not end its read)", d)
	}
	mustSend(t, ctx, rep, "re")
	_ = p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, _, err := p.r.Next(nil)
	if err != nil || len(f) != 2 || string(f[1]) != "re" {
		t.Fatalf("raw REQ read %q, %v", f, err)
	}
	if st := rep.Stats(); st.Disconnects != 1 {
		t.Fatalf("disconnects %d, want the first REQ's only", st.Disconnects)
	}
}

// While a Recv holds the reader role, PINGs are answered and a silent
// peer is found dead by our heartbeats.
func TestDirectRecvHeartbeats(t *testing.T) {
	ctx := tctx(t)
	rep := mk(t, Rep, Config{HeartbeatInterval: 20 * time.Millisecond, HeartbeatTimeout: 100 * time.Millisecond})
	ep := bind(t, rep, "tcp://127.0.0.1:0")
	p := rawConnect(t, ep, "REQ")
	waitEv(t, rep, EventAccepted)
	got := recvAsync(ctx, rep)
	testutil.WaitFor(t, "a Recv reading the connection", 0, func() bool { return readingDirectly(rep) })
	if err := p.w.WriteCommand(zmtp.CmdPing, zmtp.AppendPing(nil, 0, []byte("ctx"))); err != nil {
		t.Fatal(err)
	}
	if err := p.w.Flush(); err != nil {
		t.Fatal(err)
	}
	_ = p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, cmd, err := p.r.Next(nil)
		if err != nil {
			t.Fatalf("raw peer: %v, want PONG", err)
		}
		if cmd.Name == zmtp.CmdPong {
			if string(cmd.Body) != "ctx" {
				t.Fatalf("PONG %q", cmd.Body)
			}
			break
		}
	}
	if rep.st.directRecv.Load() != 0 || !readingDirectly(rep) {
		t.Fatal("the PING was not read by the Recv")
	}
	// Silent from now on (our PINGs are not answered): dead.
	ev := waitEv(t, rep, EventDisconnected)
	if !errors.Is(ev.Err, errHeartbeat) {
		t.Fatalf("disconnect reason %v, want heartbeat timeout", ev.Err)
	}
	rep.Close()
	if res := <-got; !errors.Is(res.err, ErrClosed) {
		t.Fatalf("Recv: %v", res.err)
	}
}

// CURVE: a Recv reading the connection decrypts what it reads.
func TestDirectRecvCurve(t *testing.T) {
	ctx := tctx(t)
	spub, ssec := mustKeys(t)
	cpub, csec := mustKeys(t)
	rep := mk(t, Rep, Config{CurveServer: true, CurveSecretKey: ssec, Authenticator: AllowCurveKeys(cpub)})
	ep := bind(t, rep, "tcp://127.0.0.1:0")
	req := mk(t, Req, Config{CurveServerKey: spub, CurveSecretKey: csec, CurvePublicKey: cpub})
	connect(t, req, ep)
	const n = 5
	for i := range n {
		m := fmt.Sprint("secret-", i, strings.Repeat("y", i*5000))
		got := recvAsync(ctx, rep)
		testutil.WaitFor(t, "a Recv reading the connection", 0, func() bool { return readingDirectly(rep) })
		mustSend(t, ctx, req, m, "two")
		if res := <-got; res.err != nil {
			t.Fatal(res.err)
		} else {
			eq(t, res.frames, m, "two")
		}
		got = recvAsync(ctx, req)
		testutil.WaitFor(t, "a Recv reading the connection", 0, func() bool { return readingDirectly(req) })
		mustSend(t, ctx, rep, "re:"+m)
		if res := <-got; res.err != nil {
			t.Fatal(res.err)
		} else {
			eq(t, res.frames, "re:"+m)
		}
	}
	if rep.st.directRecv.Load() != n || req.st.directRecv.Load() != n {
		t.Fatalf("CURVE: Recv read %d and %d of %d messages itself", rep.st.directRecv.Load(), req.st.directRecv.Load(), n)
	}
}

// receivers starts k goroutines receiving on dealer until it fails (Close
// ends them), each sending the first frame of what it got on got and its
// final error on errs.
func receivers(ctx context.Context, dealer *Socket, k int, got chan<- string, errs chan<- error) {
	for range k {
		go func() {
			for {
				m, err := dealer.Recv(ctx)
				if err != nil {
					errs <- err
					return
				}
				got <- string(m.Frames[0])
			}
		}()
	}
}

// routerDealer returns a ROUTER and a DEALER connected to it over tcp,
// with the DEALER's identity as the ROUTER knows it.
func routerDealer(t *testing.T, ctx context.Context) (router, dealer *Socket, id string) {
	router = mk(t, Router, Config{})
	dealer = mk(t, Dealer, Config{})
	connect(t, dealer, bind(t, router, "tcp://127.0.0.1:0"))
	mustSend(t, ctx, dealer, "hello")
	return router, dealer, mustRecv(t, ctx, router)[0]
}

// Several goroutines in Recv on a DEALER with one peer take turns reading
// the connection: every message arrives once.
func TestDirectRecvConcurrentReceivers(t *testing.T) {
	ctx := tctx(t)
	router, dealer, id := routerDealer(t, ctx)
	const k, n = 4, 400
	got := make(chan string, n)
	errs := make(chan error, k)
	receivers(ctx, dealer, k, got, errs)
	for i := range n {
		mustSend(t, ctx, router, id, fmt.Sprint(i))
	}
	seen := make(map[string]bool)
	for range n {
		var m string
		select {
		case m = <-got:
		case <-ctx.Done():
			t.Fatalf("%d of %d messages arrived", len(seen), n)
		}
		if seen[m] {
			t.Fatalf("message %s twice", m)
		}
		seen[m] = true
	}
	dealer.Close()
	for range k {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Fatalf("Recv after Close: %v", err)
		}
	}
	if len(got) != 0 {
		t.Fatalf("%d messages more than sent", len(got))
	}
}

// While several Recv calls wait on a socket with one peer, none reads the
// connection itself: the reader goroutine reads for them all (many
// messages per read) and hands the messages out. Taking turns at the
// connection cost an RPC server with many receivers a fifth of its
// calls/s.
func TestSeveralReceiversLeaveTheConnectionToTheReader(t *testing.T) {
	ctx := tctx(t)
	router, dealer, id := routerDealer(t, ctx)
	const k, n = 4, 50
	got := make(chan string, n)
	receivers(ctx, dealer, k, got, make(chan error, k)) // Close by the test's cleanup ends them
	for i := range n {
		testutil.WaitFor(t, "every receiver waiting", 0, func() bool { return dealer.in.waiting.Load() == k })
		mustSend(t, ctx, router, id, fmt.Sprint(i))
		if m := <-got; m != fmt.Sprint(i) {
			t.Fatalf("got %q, want %d", m, i)
		}
	}
	if d := dealer.st.directRecv.Load(); d != 0 {
		t.Fatalf("%d of %d messages read by a Recv itself with %d receivers waiting", d, n, k)
	}
}

// Kicks at any point of a stream (inside a frame header, a body, a
// multipart message or between messages) never lose or reorder a byte: a
// Recv reading the connection gets every message whole and in order.
func TestDirectRecvKicksAnywhere(t *testing.T) {
	ctx := tctx(t)
	dealer := mk(t, Dealer, Config{})
	ep := bind(t, dealer, "tcp://127.0.0.1:0")
	p := rawConnect(t, ep, "ROUTER")
	waitPeers(t, dealer, 1)
	rnd := rand.New(rand.NewPCG(1, 2))
	const n = 300
	var want [][]string
	var buf bytes.Buffer
	w := zmtp.NewWriter(&buf, 0)
	for i := range n {
		m := []string{fmt.Sprint(i)}
		for range rnd.IntN(3) {
			size := rnd.IntN(300)
			if rnd.IntN(20) == 0 {
				size = 70<<10 + rnd.IntN(100<<10) // larger than a read block
			}
			m = append(m, strings.Repeat(string(rune('a'+i%26)), size))
		}
		frames := make([][]byte, len(m))
		for j, f := range m {
			frames[j] = []byte(f)
		}
		if err := w.WriteMessage(frames); err != nil {
			t.Fatal(err)
		}
		want = append(want, m)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	stream := buf.Bytes()
	dp := (*dealer.peers.Load())[0]
	stop := make(chan struct{})
	kicked := make(chan int)
	go func() {
		k := 0
		defer func() { kicked <- k }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			dp.kick()
			k++
			runtime.Gosched()
		}
	}()
	wrote := make(chan error, 1)
	go func() {
		for len(stream) > 0 {
			k := min(len(stream), 1+rnd.IntN(4096))
			if _, err := p.c.Write(stream[:k]); err != nil {
				wrote <- err
				return
			}
			stream = stream[k:]
			runtime.Gosched()
		}
		wrote <- nil
	}()
	for i := range n {
		got := mustRecv(t, ctx, dealer)
		eq(t, got, want[i]...)
	}
	close(stop)
	if k := <-kicked; k == 0 {
		t.Fatal("no kicks")
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if d := dealer.st.directRecv.Load(); d == 0 {
		t.Fatal("no message read by Recv itself")
	}
	if st := dealer.Stats(); st.Disconnects != 0 {
		t.Fatalf("the connection ended: %+v", st)
	}
}

// A Recv that read a message and left part of the next one buffered gives
// the connection back to its reader goroutine at once: only a reader can
// read on from inside a message, so a later Recv must not take it first.
func TestDirectRecvLeavesPartToReader(t *testing.T) {
	ctx := tctx(t)
	dealer := mk(t, Dealer, Config{})
	ep := bind(t, dealer, "tcp://127.0.0.1:0")
	p := rawConnect(t, ep, "ROUTER")
	waitPeers(t, dealer, 1)
	var buf bytes.Buffer
	w := zmtp.NewWriter(&buf, 0)
	for _, m := range []string{"first", "second-" + strings.Repeat("z", 1000)} {
		if err := w.WriteMessage([][]byte{[]byte(m)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	stream := buf.Bytes()
	cut := len(stream) - 500
	got := recvAsync(ctx, dealer)
	testutil.WaitFor(t, "a Recv reading the connection", 0, func() bool { return readingDirectly(dealer) })
	dp := (*dealer.peers.Load())[0]
	base := dp.rd.got.Load()
	p.write(t, stream[:cut])
	if res := <-got; res.err != nil {
		t.Fatal(res.err)
	} else {
		eq(t, res.frames, "first")
	}
	// The Recv read everything written, so the second message is partly
	// buffered now.
	if n := dp.rd.got.Load() - base; n != int64(cut) {
		t.Fatalf("the Recv read %d of %d bytes", n, cut)
	}
	if r := dp.role.Load(); r != roleReader {
		t.Fatalf("reader role %d after a Recv left a message part, want %d (the reader goroutine)", r, roleReader)
	}
	got = recvAsync(ctx, dealer)
	p.write(t, stream[cut:])
	if res := <-got; res.err != nil {
		t.Fatal(res.err)
	} else {
		eq(t, res.frames, "second-"+strings.Repeat("z", 1000))
	}
}

// Callers that give each Recv a context of its own and cancel it when the
// Recv returns (a timeout per call, the common case) keep reading the
// connection themselves: the end of one Recv's context must not kick the
// next Recv's read.
func TestDirectRecvContextPerCall(t *testing.T) {
	for _, tr := range []string{"tcp", "ipc"} {
		t.Run(tr, func(t *testing.T) {
			ctx := tctx(t)
			rep := mk(t, Rep, Config{})
			req := mk(t, Req, Config{})
			// The readers never take a free role back by themselves
			// here: the only kicks are the two that take it the first
			// time (and any an ended context makes).
			rep.lendIdle, req.lendIdle = time.Hour, time.Hour
			connect(t, req, bind(t, rep, sockettest.Endpoint(t, tr)))
			call := func(s *Socket, send func()) []string {
				c, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				return recvWaiting(t, c, s, false, send)
			}
			const n = 40
			for i := range n {
				eq(t, call(rep, func() { mustSend(t, ctx, req, fmt.Sprint(i)) }), fmt.Sprint(i))
				eq(t, call(req, func() { mustSend(t, ctx, rep, "re") }), "re")
			}
			if dq, dp := req.st.directRecv.Load(), rep.st.directRecv.Load(); dq != n || dp != n {
				t.Fatalf("Recv read %d of %d replies and %d of %d requests itself", dq, n, dp, n)
			}
			if k := req.st.kicks.Load() + rep.st.kicks.Load(); k > 2 {
				t.Fatalf("%d reads kicked, want 2 at most (the end of an earlier Recv's context kicked the next)", k)
			}
		})
	}
}
