package pull_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/internal/zmtp"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

func heapInuse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// TestPeerThatNeverReadsCostsBoundedMemory: raw ZMTP DEALERs over TCP
// pipeline fetches of 4 GiB max-bytes each for 8 MiB of data and never
// read: one connection with 64 fetches (which made the publisher hold
// every 4 MiB reply, 252 MiB, before), then 16 connections with 16 each.
// The publisher's heap grows by less than 48 MiB (its documented send
// budget, 32 MiB, plus slack) and the memory is returned once the peer
// disconnects.
func TestPeerThatNeverReadsCostsBoundedMemory(t *testing.T) {
	for _, tc := range []struct{ conns, fetches int }{{1, 64}, {16, 16}} {
		t.Run(fmt.Sprintf("%dx%d", tc.conns, tc.fetches), func(t *testing.T) {
			neverReads(t, tc.conns, tc.fetches)
		})
	}
}

func neverReads(t *testing.T, conns, fetches int) {
	l := openSpool(t, spool.Config{})
	val := bytes.Repeat([]byte{'v'}, 64<<10)
	for range 128 {
		if _, err := l.Append(context.Background(), spool.Record{Value: val}); err != nil {
			t.Fatal(err)
		}
	}
	srv := startServer(t, map[string]*spool.Log{"s": l})
	before := heapInuse()

	var cs []net.Conn
	for range conns {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(srv.Endpoints()[0], "tcp://"), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
		_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		r, w := zmtp.NewReader(c, 0), zmtp.NewWriter(c, 0)
		if _, err := zmtp.Handshake(r, w, zmtp.Config{SocketType: "DEALER"}); err != nil {
			t.Fatal(err)
		}
		for i := range fetches {
			req := pull.EncodeRequest(&pull.Request{Version: pull.ProtocolVersion, Op: pull.OpFetch, ID: uint32(i), Offset: 0, MaxBytes: math.MaxUint32, Stream: "s"})
			if err := w.WriteMessage(req); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "every fetch handled", 0, func() bool { return srv.Stats().Requests == uint64(conns*fetches) })
	grew := heapInuse() - before
	t.Logf("publisher heap grew %d MiB for %d connections with %d unread fetches each", grew>>20, conns, fetches)
	if grew > 48<<20 {
		t.Fatalf("publisher heap grew %d bytes", grew)
	}

	for _, c := range cs {
		c.Close()
	}
	var after int64
	testutil.WaitFor(t, "memory returned after the disconnect", 0, func() bool {
		after = heapInuse() - before
		return after < 8<<20
	})
	t.Logf("publisher heap %+d KiB after the disconnect", after>>10)
}

// TestServerRefusesRouterMandatory: replies to a peer that does not read
// must be dropped, never wait in the server's receive loop.
func TestServerRefusesRouterMandatory(t *testing.T) {
	_, err := pull.NewServer(pull.ServerConfig{
		Lookup: func(string) (*spool.Log, bool) { return nil, false },
		Socket: socket.Config{RouterMandatory: true},
	})
	if err == nil {
		t.Fatal("a server with RouterMandatory started")
	}
}

// TestCatchUpLosesNoReply: a consumer catching up on 70 MB of 1 KiB records
// in replies of up to 4 MiB never waits for a reply that was dropped. The
// server's ROUTER drops what does not fit a peer's queue, and the bytes of
// the reply just written came back to the queue only at its writer's next
// turn: a consumer that read the reply and asked again before then found
// its next reply dropped and waited MaxWait + RequestTimeout for it.
func TestCatchUpLosesNoReply(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 70 MB")
	}
	l, err := spool.Open(spool.Config{Dir: t.TempDir(), Sync: spool.SyncNone, Codec: spool.CodecNone})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	recs := make([]spool.Record, 1024)
	for i := range recs {
		recs[i] = spool.Record{Value: make([]byte, 1024)}
	}
	const batches = 68
	for range batches {
		if _, err := l.Append(context.Background(), recs...); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := pull.NewServer(pull.ServerConfig{Lookup: func(string) (*spool.Log, bool) { return l, true }})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := pull.NewConsumer(pull.ConsumerConfig{Stream: "s", Publishers: map[string]string{"p": srv.Endpoints()[0]}, MaxBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := 0; i < batches*len(recs); i++ {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.Ack(m)
	}
	if st := c.Stats()[0]; st.Errors != 0 {
		t.Fatalf("%d fetches waited for a reply that never came (server: %+v)", st.Errors, srv.Stats())
	}
}
