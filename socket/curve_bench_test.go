package socket_test

// The cost of CURVE over NULL on our engine, same patterns and sizes, and
// libzmq's CURVE figure (pyzmq processes only: perf.c has no CURVE):
//
//	go test ./socket/ -run '^$' -bench 'Curve' -benchtime 2s

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fastmq/fastmq/socket"
)

// curveLink is ourLink with CURVE: the receiver is the server.
func curveLink(b *testing.B, ctx context.Context, transport string, sk, rk socket.Kind) (benchEnd, benchEnd) {
	spub, ssec, err := socket.NewCurveKeypair()
	if err != nil {
		b.Fatal(err)
	}
	r, err := socket.New(rk, socket.Config{CurveServer: true, CurveAllowAnyClient: true, CurveSecretKey: ssec})
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
	s, err := socket.New(sk, socket.Config{PubNoDrop: noDrop, CurveServerKey: spub})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Connect(ep); err != nil {
		b.Fatal(err)
	}
	return ourEnd{s, ctx}, ourEnd{r, ctx}
}

func BenchmarkCurve(b *testing.B) {
	for _, sec := range []struct {
		name string
		link linkFunc
	}{{"null", ourLink}, {"curve", curveLink}} {
		for _, transport := range []string{"tcp", "ipc"} {
			for _, size := range []int{100, 1024} {
				b.Run(fmt.Sprintf("pushpull/%s/%s/%dB", sec.name, transport, size), func(b *testing.B) {
					benchStream(b, sec.link, "pushpull", transport, size)
				})
			}
			b.Run(fmt.Sprintf("reqrep/%s/%s/100B", sec.name, transport), func(b *testing.B) {
				benchReqRep(b, sec.link, transport, 100)
			})
		}
	}
}

// BenchmarkLibzmqCurve is BenchmarkLibzmq's pyzmq figure with CURVE on
// both ends (the receiver binds and serves), through perf.py and
// testdata/interop/curve/sitecustomize.py.
func BenchmarkLibzmqCurve(b *testing.B) {
	if err := exec.Command(pythonPath, "-c", "import zmq").Run(); err != nil {
		b.Skipf("pyzmq not available: %v", err)
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "interop", "curve"))
	if err != nil {
		b.Fatal(err)
	}
	k := curveKeys
	b.Setenv("PYTHONPATH", dir)
	b.Setenv("FASTMQ_PY_CURVE_AUTO", k.serverSec+" "+k.serverPub+" "+k.clientSec+" "+k.clientPub)
	for _, transport := range []string{"tcp", "ipc"} {
		for _, size := range []int{100, 1024} {
			b.Run(fmt.Sprintf("pushpull/pyzmq/%s/%dB", transport, size), func(b *testing.B) {
				libzmqPerf(b, "thr", transport, size, false)
			})
		}
		b.Run(fmt.Sprintf("reqrep/pyzmq/%s/100B", transport), func(b *testing.B) {
			libzmqPerf(b, "lat", transport, 100, false)
		})
	}
}
