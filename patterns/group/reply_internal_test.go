package group

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

type nopSender struct{}

func (nopSender) Send([][]byte, [][]byte) error { return nil }

// A fetch that may take many records, answered with the few the log
// holds (as at low rates), gets a reply buffer sized for those few, not
// a FrameBytes buffer: every reply's buffer is garbage once sent.
func TestReplySizedForRecordsHeld(t *testing.T) {
	dir := t.TempDir()
	l, err := spool.Open(spool.Config{Dir: filepath.Join(dir, "s")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lookup := func(string) (*spool.Log, bool) { return l, true }
	s, err := NewServer(ServerConfig{Dir: filepath.Join(dir, "groups"), Lookup: lookup,
		Open: func(string) (*spool.Log, error) { return l, nil }, Send: nopSender{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	val := make([]byte, 100)
	if _, err := l.Append(context.Background(), spool.Record{Value: val}, spool.Record{Value: val}); err != nil {
		t.Fatal(err)
	}
	req := wire.Request{Op: wire.OpFetch, MaxRecords: 512, MaxBytes: 1 << 20, AckWaitMillis: 30000, MaxAckPending: 1000,
		Flags: wire.FlagFrames, Stream: "s", Group: "g", Member: "m"}
	s.mu.Lock()
	g, err := s.groupLocked(req, l)
	if err != nil {
		s.mu.Unlock()
		t.Fatal(err)
	}
	ld := s.leaseLocked(g, l, req, time.Now())
	data, n := ld.data, ld.n
	s.mu.Unlock()
	if n != 2 || len(data) != 1 {
		t.Fatalf("leased %d records in %d frames, want 2 in 1", n, len(data))
	}
	if c := cap(data[0]); c > 2*len(data[0]) {
		t.Fatalf("a reply of %d bytes has a buffer of %d", len(data[0]), c)
	}
}

// orderSender records the ids of the replies it sent, in the order
// their Sends ended; the first Send waits until release is closed.
type orderSender struct {
	mu      sync.Mutex
	ids     []uint32
	began   bool
	first   chan struct{} // closed when the first Send began
	release chan struct{}
}

func (o *orderSender) Send(_ [][]byte, frames [][]byte) error {
	o.mu.Lock()
	first := !o.began
	o.began = true
	o.mu.Unlock()
	if first {
		close(o.first)
		<-o.release
	}
	o.mu.Lock()
	o.ids = append(o.ids, binary.BigEndian.Uint32(frames[0][2:]))
	o.mu.Unlock()
	return nil
}

// Replies posted under the server's lock go out in the order they were
// posted, whichever goroutines post them: a stream fetch's replies are
// made by whoever serves it, and an open reply overtaken by the last one
// would be dropped by the member. While one goroutine sends, another's
// reply waits for it rather than overtaking it.
func TestPostedRepliesInOrder(t *testing.T) {
	o := &orderSender{first: make(chan struct{}), release: make(chan struct{})}
	s := &Server{cfg: ServerConfig{Send: o}, log: slog.New(slog.DiscardHandler)}
	reply := func(id uint32) [][]byte {
		return wire.EncodeReply(&wire.Reply{Status: wire.StatusOpen, ID: id, Count: 1, Data: []byte{0}})
	}
	s.mu.Lock()
	s.postLocked(nil, reply(1))
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.mu.Lock()
		s.unlockAndSend() // sends 1, waits in it
		close(done)
	}()
	<-o.first
	s.mu.Lock()
	s.postLocked(nil, reply(2))
	s.unlockAndSend() // the other goroutine is sending: it sends 2 after 1
	close(o.release)
	<-done
	o.mu.Lock()
	defer o.mu.Unlock()
	if fmt.Sprint(o.ids) != "[1 2]" {
		t.Fatalf("replies sent in the order %v, want [1 2]", o.ids)
	}
}

// A stream's reply that comes after its request stopped waiting, with
// the request's channel still holding an unread reply, is dropped: the
// link's receive loop does not wait on that channel, and the next
// request's reply gets through.
func TestRecvLoopSkipsAbandonedStream(t *testing.T) {
	router, err := socket.New(socket.Router, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer router.Close()
	ep, err := router.Bind("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dealer, err := socket.New(socket.Dealer, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer dealer.Close()
	if err := dealer.Connect(ep); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln := &link{sock: dealer, waiting: map[uint32]waiter{}}
	ln.ctx, ln.cancel = context.WithCancel(ctx)
	// Request 1 gave up (done closed) with a reply unread in its channel;
	// request 2 waits.
	gone := waiter{fetch: true, stream: true, ch: make(chan replyOrErr, 1), done: make(chan struct{})}
	gone.ch <- replyOrErr{}
	close(gone.done)
	live := waiter{fetch: true, ch: make(chan replyOrErr, 1), done: make(chan struct{})}
	ln.waiting[1], ln.waiting[2] = gone, live
	ln.wg.Add(1)
	go ln.recvLoop()
	defer func() {
		ln.cancel()
		ln.wg.Wait()
	}()
	// The router learns the dealer's identity from one message.
	if err := dealer.Send(ctx, socket.Msg{Frames: [][]byte{[]byte("hello")}}); err != nil {
		t.Fatal(err)
	}
	hello, err := router.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := hello.Frames[0]
	for _, r := range []*wire.Reply{{Status: wire.StatusOpen, ID: 1}, {Status: wire.StatusOK, ID: 2}} {
		if err := router.Send(ctx, socket.Msg{Frames: append([][]byte{id}, wire.EncodeReply(r)...)}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case re := <-live.ch:
		if re.err != nil || re.rep.ID != 2 {
			t.Fatalf("request 2 got %+v", re)
		}
	case <-ctx.Done():
		t.Fatal("request 2's reply never came: the receive loop waits on request 1's channel")
	}
}
