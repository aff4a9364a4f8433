package socket_test

// Side-by-side benchmarks: our sockets against go-zeromq/zmq4's own sockets
// on the same patterns, sizes and transports, plus libzmq's figure through
// testdata/interop/perf.py (both ends libzmq, in two separate processes).
//
//	go test ./socket/ -run '^$' -bench 'Compare|Libzmq' -benchtime 2s
//
// Every benchmark reports msgs/s; request/reply also reports the p50 round
// trip in µs. ns/op is the time per message (per round trip for reqrep).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/fastmq/fastmq/socket"
)

// benchEnd is one end of a benchmark link, whichever library is under it.
type benchEnd interface {
	send(frame []byte) error
	recv() ([]byte, error)
	close()
}

type ourEnd struct {
	s   *socket.Socket
	ctx context.Context
}

func (e ourEnd) send(f []byte) error { return e.s.Send(e.ctx, socket.NewMsg(f)) }
func (e ourEnd) recv() ([]byte, error) {
	m, err := e.s.Recv(e.ctx)
	if err != nil {
		return nil, err
	}
	return m.Frames[0], nil
}
func (e ourEnd) close() { e.s.Close() }

type zmq4End struct{ s zmq4.Socket }

func (e zmq4End) send(f []byte) error { return e.s.Send(zmq4.NewMsg(f)) }
func (e zmq4End) recv() ([]byte, error) {
	m, err := e.s.Recv()
	if err != nil {
		return nil, err
	}
	return m.Frames[0], nil
}
func (e zmq4End) close() { e.s.Close() }

// noDropKey marks a context whose benchmark wants Config.PubNoDrop.
type noDropKey struct{}

// benchLink returns a connected sender/receiver pair: the receiver binds.
type linkFunc func(b *testing.B, ctx context.Context, transport string, sendKind, recvKind socket.Kind) (snd, rcv benchEnd)

func benchEP(b *testing.B, transport string) string {
	if transport == "ipc" {
		dir, err := os.MkdirTemp("", "fmqb")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return "ipc://" + filepath.Join(dir, "s.sock")
	}
	return "tcp://127.0.0.1:0"
}

func ourLink(b *testing.B, ctx context.Context, transport string, sk, rk socket.Kind) (benchEnd, benchEnd) {
	r, err := socket.New(rk, socket.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ep, err := r.Bind(benchEP(b, transport))
	if err != nil {
		b.Fatal(err)
	}
	if rk == socket.Sub {
		if err := r.Subscribe(nil); err != nil {
			b.Fatal(err)
		}
	}
	noDrop, _ := ctx.Value(noDropKey{}).(bool)
	s, err := socket.New(sk, socket.Config{PubNoDrop: noDrop})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Connect(ep); err != nil {
		b.Fatal(err)
	}
	return ourEnd{s, ctx}, ourEnd{r, ctx}
}

func zmq4Link(b *testing.B, ctx context.Context, transport string, sk, rk socket.Kind) (benchEnd, benchEnd) {
	mk := map[socket.Kind]func(context.Context, ...zmq4.Option) zmq4.Socket{
		socket.Push: zmq4.NewPush, socket.Pull: zmq4.NewPull,
		socket.Pub: zmq4.NewPub, socket.Sub: zmq4.NewSub,
		socket.Req: zmq4.NewReq, socket.Rep: zmq4.NewRep,
	}
	r := mk[rk](ctx)
	ep := benchEP(b, transport)
	if err := r.Listen(ep); err != nil {
		b.Fatal(err)
	}
	if transport == "tcp" {
		ep = "tcp://" + r.Addr().String()
	}
	if rk == socket.Sub {
		if err := r.SetOption(zmq4.OptionSubscribe, ""); err != nil {
			b.Fatal(err)
		}
	}
	s := mk[sk](ctx)
	if err := s.Dial(ep); err != nil {
		b.Fatal(err)
	}
	return zmq4End{s}, zmq4End{r}
}

var benchImpls = []struct {
	name string
	link linkFunc
}{{"fastmq", ourLink}, {"zmq4", zmq4Link}}

func BenchmarkCompare(b *testing.B) {
	for _, pattern := range []string{"pushpull", "pubsub", "pubsub-nodrop"} {
		for _, impl := range benchImpls {
			for _, transport := range []string{"tcp", "ipc"} {
				for _, size := range []int{100, 1024} {
					name := fmt.Sprintf("%s/%s/%s/%dB", pattern, impl.name, transport, size)
					b.Run(name, func(b *testing.B) { benchStream(b, impl.link, pattern, transport, size) })
				}
			}
		}
	}
	for _, impl := range benchImpls {
		for _, transport := range []string{"tcp", "ipc"} {
			b.Run(fmt.Sprintf("reqrep/%s/%s/100B", impl.name, transport), func(b *testing.B) {
				benchReqRep(b, impl.link, transport, 100)
			})
		}
	}
}

// benchStream measures b.N one-way messages, from the first send until the
// receiver has them all (pubsub: until it has all it will get).
func benchStream(b *testing.B, link linkFunc, pattern, transport string, size int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sk, rk := socket.Push, socket.Pull
	if pattern == "pubsub-nodrop" {
		// Our PUB waits for the subscriber instead of dropping, as
		// zmq4's always does: both are lossless.
		sk, rk = socket.Pub, socket.Sub
		ctx = context.WithValue(ctx, noDropKey{}, true)
		pattern = "pubsub"
	}
	if pattern == "pubsub" {
		sk, rk = socket.Pub, socket.Sub
	}
	snd, rcv := link(b, ctx, transport, sk, rk)
	defer closeLink(snd, rcv)
	if pattern == "pubsub" {
		warmUp(b, snd, rcv, size)
	} else {
		if err := snd.send(make([]byte, size)); err != nil {
			b.Fatal(err)
		}
		if _, err := rcv.recv(); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	got := make(chan int, 1)
	b.ResetTimer()
	start := time.Now()
	go func() {
		n := 0
		for n < b.N {
			f, err := rcv.recv()
			if err != nil {
				break
			}
			if len(f) > 0 && f[0] == 'E' { // end marker (pubsub)
				break
			}
			if len(f) > 0 && f[0] == 'W' { // warm-up (pubsub)
				continue
			}
			n++
		}
		got <- n
	}()
	payload := bytes.Repeat([]byte{'x'}, size)
	var sendErr error
	for i := 0; i < b.N; i++ {
		if sendErr = snd.send(bytes.Clone(payload)); sendErr != nil {
			break
		}
	}
	var n int
	if pattern == "pubsub" {
		// A PUB may drop for a slow subscriber: end with markers until
		// the receiver stops.
		end := bytes.Repeat([]byte{'E'}, size)
	loop:
		for range 100000 {
			select {
			case n = <-got:
				break loop
			default:
			}
			if err := snd.send(bytes.Clone(end)); err != nil {
				n = <-got
				break
			}
			runtimeYield()
		}
	} else {
		n = <-got
	}
	el := time.Since(start)
	b.StopTimer()
	if sendErr != nil {
		b.Fatalf("send: %v", sendErr)
	}
	if n == 0 {
		b.Fatal("nothing received")
	}
	b.ReportMetric(float64(n)/el.Seconds(), "msgs/s")
	if pattern == "pubsub" {
		b.ReportMetric(float64(b.N-n)/float64(b.N)*100, "%lost")
	}
}

// closeLink closes the sending end, then the receiving end. A zmq4
// receiver is first read until its connection's end shows up: zmq4 leaves
// a reader goroutine blocked for ever otherwise.
func closeLink(snd, rcv benchEnd) {
	snd.close()
	if z, ok := rcv.(zmq4End); ok {
		stop := time.AfterFunc(5*time.Second, z.close)
		for range 1 << 20 {
			if _, err := z.recv(); err != nil {
				break
			}
		}
		stop.Stop()
	}
	rcv.close()
}

// runtimeYield paces the end-marker loop without spinning hard.
func runtimeYield() {
	t := time.NewTimer(100 * time.Microsecond)
	<-t.C
}

// warmUp publishes until the subscriber has got a message, so that the
// subscription is in place before the measured stream.
func warmUp(b *testing.B, snd, rcv benchEnd, size int) {
	got := make(chan error, 1)
	go func() {
		_, err := rcv.recv()
		got <- err
	}()
	w := bytes.Repeat([]byte{'W'}, size)
	for range 100000 {
		if err := snd.send(bytes.Clone(w)); err != nil {
			b.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				b.Fatal(err)
			}
			return // the rest of the warm-up is skipped by the receiver
		case <-time.After(time.Millisecond):
		}
	}
	b.Fatal("subscriber got no warm-up message")
}

func benchReqRep(b *testing.B, link linkFunc, transport string, size int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, rep := link(b, ctx, transport, socket.Req, socket.Rep)
	defer closeLink(req, rep)
	done := make(chan error, 1)
	go func() {
		for {
			f, err := rep.recv()
			if err != nil {
				done <- err
				return
			}
			if len(f) > 0 && f[0] == 'E' {
				done <- rep.send(f)
				return
			}
			if err := rep.send(f); err != nil {
				done <- err
				return
			}
		}
	}()
	payload := bytes.Repeat([]byte{'x'}, size)
	lat := make([]time.Duration, 0, b.N)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		if err := req.send(bytes.Clone(payload)); err != nil {
			b.Fatal(err)
		}
		if _, err := req.recv(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
	}
	el := time.Since(start)
	b.StopTimer()
	if err := req.send(bytes.Repeat([]byte{'E'}, size)); err != nil {
		b.Fatal(err)
	}
	if _, err := req.recv(); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-µs")
}

// BenchmarkLibzmq gives libzmq's figures for the same tests through
// testdata/interop/perf.py: libzmq at both ends, in two processes, with
// pyzmq loops ("pyzmq") or, when a C compiler is present, a small C
// program linked against libzmq ("native").
func BenchmarkLibzmq(b *testing.B) {
	if err := exec.Command(pythonPath, "-c", "import zmq").Run(); err != nil {
		b.Skipf("pyzmq not available: %v", err)
	}
	for _, native := range []bool{false, true} {
		impl := "pyzmq"
		if native {
			impl = "native"
			if _, err := exec.LookPath("cc"); err != nil {
				continue
			}
		}
		for _, transport := range []string{"tcp", "ipc"} {
			for _, size := range []int{100, 1024} {
				b.Run(fmt.Sprintf("pushpull/%s/%s/%dB", impl, transport, size), func(b *testing.B) {
					libzmqPerf(b, "thr", transport, size, native)
				})
			}
			b.Run(fmt.Sprintf("reqrep/%s/%s/100B", impl, transport), func(b *testing.B) {
				libzmqPerf(b, "lat", transport, 100, native)
			})
		}
	}
}

func libzmqPerf(b *testing.B, kind, transport string, size int, native bool) {
	count := max(b.N, 1000)
	args := []string{filepath.Join("testdata", "interop", "perf.py"), kind,
		"--transport", transport, "--size", strconv.Itoa(size), "--count", strconv.Itoa(count)}
	if native {
		args = append(args, "--native")
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	out, err := exec.Command(pythonPath, args...).Output()
	if err != nil {
		b.Fatalf("perf.py %v: %v", args, err)
	}
	var r struct {
		MsgsPerS float64 `json:"msgs_per_s"`
		P50us    float64 `json:"p50_us"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatalf("perf.py output %q: %v", out, err)
	}
	b.ReportMetric(r.MsgsPerS, "msgs/s")
	if r.MsgsPerS > 0 {
		b.ReportMetric(1e9/r.MsgsPerS, "ns/op")
	}
	if kind == "lat" {
		b.ReportMetric(r.P50us, "p50-µs")
	}
}
