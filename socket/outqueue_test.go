package socket

import (
	"context"
	"encoding/binary"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/internal/zmtp"
)

// TestOutQueueBlockedSenders runs many senders blocked on a tiny queue
// against a writer taking small batches: every message arrives once, each
// sender's in order, and no sender is left waiting (a lost wake-up would
// hang the test until its deadline).
func TestOutQueueBlockedSenders(t *testing.T) {
	const senders, each = 8, 2000
	q := newOutQueue(4, DefaultHWMBytes, nil, 0)
	done := make(chan struct{})
	defer close(done)
	var wg sync.WaitGroup
	for id := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var b [8]byte
				binary.BigEndian.PutUint32(b[:4], uint32(id))
				binary.BigEndian.PutUint32(b[4:], uint32(i))
				m := Msg{Frames: [][]byte{b[:]}}
				for !q.push(m, msgBytes(m)) {
					if q.waitRoom(context.Background(), done, nil, 0) != nil {
						return
					}
				}
			}
		}()
	}
	next := make([]uint32, senders)
	batch := make([]Msg, 0, 3)
	deadline := time.After(30 * time.Second)
	var written int64
	for got := 0; got < senders*each; {
		b, n := q.take(batch, written)
		written = n
		if len(b) == 0 {
			select {
			case <-q.ready:
				continue
			case <-deadline:
				t.Fatalf("stalled after %d messages", got)
			}
		}
		for _, m := range b {
			id := binary.BigEndian.Uint32(m.Frames[0][:4])
			i := binary.BigEndian.Uint32(m.Frames[0][4:])
			if i != next[id] {
				t.Fatalf("sender %d: message %d, want %d", id, i, next[id])
			}
			next[id]++
			got++
		}
	}
	wg.Wait()
	if q.blocked.waiting() != 0 || q.ring.n != 0 {
		t.Fatalf("blocked=%d queued=%d after the run", q.blocked.waiting(), q.ring.n)
	}
}

// TestOutQueueWakesWriter checks the writer's sleep protocol: a writer
// that found the queue empty is woken by the next push, once.
func TestOutQueueWakesWriter(t *testing.T) {
	q := newOutQueue(10, DefaultHWMBytes, nil, 0)
	if b, _ := q.take(make([]Msg, 0, 4), 0); len(b) != 0 {
		t.Fatalf("took %d from an empty queue", len(b))
	}
	if !q.push(NewMsg([]byte("a")), 33) || !q.push(NewMsg([]byte("b")), 33) {
		t.Fatal("push failed on an empty queue")
	}
	select {
	case <-q.ready:
	default:
		t.Fatal("push did not wake the sleeping writer")
	}
	select {
	case <-q.ready:
		t.Fatal("second push woke the writer again")
	default:
	}
	if b, _ := q.take(make([]Msg, 0, 4), 0); len(b) != 2 || string(b[0].Frames[0]) != "a" {
		t.Fatalf("took %v", b)
	}
	for i := range 10 {
		if !q.push(NewMsg([]byte{byte(i)}), 33) {
			t.Fatalf("push %d refused below the high-water mark", i)
		}
	}
	if q.push(NewMsg([]byte("x")), 33) {
		t.Fatal("push accepted past the high-water mark")
	}
}

// TestBlockedReceiversDoNotBounceWakeups runs two receivers on one socket.
// Once all messages are taken, both wait: a wake-up that finds nothing
// must not be passed back and forth between them (that kept both busy for
// as long as the socket stayed idle).
func TestBlockedReceiversDoNotBounceWakeups(t *testing.T) {
	ctx := tctx(t)
	pull := mk(t, Pull, Config{})
	push := mk(t, Push, Config{})
	connect(t, push, bind(t, pull, "inproc://bounce"))
	const n = 2000
	got := make(chan struct{}, n)
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, err := pull.Recv(rctx); err != nil {
					return
				}
				got <- struct{}{}
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	for i := range n {
		mustSend(t, ctx, push, "m")
		if i%50 == 0 {
			<-got // let the receivers run dry now and then
		}
	}
	for range n - n/50 {
		<-got
	}
	testutil.WaitFor(t, "both receivers blocked", 0, func() bool { return pull.in.blocked.waiting() == 2 })
	before := pull.in.blocked.woken.Load()
	deadline := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(deadline) {
		if w := pull.in.blocked.woken.Load(); w > before+2 {
			t.Fatalf("idle receivers woke %d times", w-before)
		}
		runtime.Gosched()
	}
}

// TestWriterYieldsToOtherDuties: with more queued than maxWriteRounds
// batches, the writer stops after that many, leaving the rest queued and
// itself woken to come back for it, so a full queue cannot hold back
// heartbeats, PONGs or Close.
func TestWriterYieldsToOtherDuties(t *testing.T) {
	s := mk(t, Push, Config{SendHWM: 10000})
	p := &peer{s: s, outq: newOutQueue(10000, DefaultHWMBytes, nil, 0), w: zmtp.NewWriter(io.Discard, 0)}
	const n = 5000
	for i := range n {
		if !p.outq.push(NewMsgString("m"), 1+FrameOverhead) {
			t.Fatalf("push %d refused", i)
		}
	}
	<-p.outq.ready // the push that found the writer asleep
	if err := p.writeQueued(make([]Msg, 0, maxBatch), maxWriteRounds); err != nil {
		t.Fatal(err)
	}
	if left, want := p.outq.len(), n-maxWriteRounds*maxBatch; left != want {
		t.Fatalf("%d messages left after the bounded rounds, want %d", left, want)
	}
	select {
	case <-p.outq.ready:
	default:
		t.Fatal("the writer yielded without waking itself for the rest")
	}
	if err := p.writeQueued(make([]Msg, 0, maxBatch), 0); err != nil {
		t.Fatal(err)
	}
	if left := p.outq.len(); left != 0 {
		t.Fatalf("%d messages left after an unbounded drain", left)
	}
}

// TestOutQueueRoomBesideTheWrittenBatch: a message that finds only the
// batch the writer took (written, its bytes not yet given back) is
// queued, even when both together pass hwmBytes: a ROUTER that drops
// what does not fit must not drop the reply to a peer that read the last
// one and asked again before the writer ran. One more is refused: the
// queue stays bounded.
func TestOutQueueRoomBesideTheWrittenBatch(t *testing.T) {
	const size = 3 << 20
	q := newOutQueue(1000, 4<<20, nil, 0)
	m := Msg{Frames: [][]byte{make([]byte, size)}}
	n := msgBytes(m)
	if !q.pushDrop(m, n) {
		t.Fatal("the first message refused by an empty queue")
	}
	if b, _ := q.take(make([]Msg, 0, 8), 0); len(b) != 1 {
		t.Fatalf("took %d messages, want 1", len(b))
	}
	// The writer wrote it and has not come back for its next take.
	if !q.pushDrop(m, n) {
		t.Fatal("a message beside the batch being written was dropped")
	}
	if q.pushDrop(m, n) {
		t.Fatal("a third message queued past hwmBytes")
	}
}

// TestOutQueueTotalLetsAnEmptyPeerThrough: SendHWMBytesTotal drops for a
// peer with messages queued, but a peer with none still gets one message
// (as Config documents), so one slow peer cannot starve the others.
func TestOutQueueTotalLetsAnEmptyPeerThrough(t *testing.T) {
	var total atomic.Int64
	m := Msg{Frames: [][]byte{make([]byte, 600)}}
	n := msgBytes(m)
	slow := newOutQueue(1000, 1<<20, &total, 2*n)
	other := newOutQueue(1000, 1<<20, &total, 2*n)
	for i := range 2 {
		if !slow.pushDrop(m, n) {
			t.Fatalf("the slow peer's message %d refused", i+1)
		}
	}
	if slow.pushDrop(m, n) {
		t.Fatal("a third message queued past the total")
	}
	if !other.pushDrop(m, n) {
		t.Fatal("a peer with nothing queued dropped for the others' total")
	}
	if other.pushDrop(m, n) {
		t.Fatal("a second message queued past the total")
	}
}

// takeSmall with small set takes the small messages before a big one and
// leaves the big one (then reported alone) to the writer goroutine: a
// goroutine writing without waiting must not take megabytes behind a few
// bytes.
func TestTakeSmallStopsBeforeBig(t *testing.T) {
	q := newOutQueue(10, 64<<20, nil, 0)
	big := NewMsg(make([]byte, maxTakeBytes))
	for _, m := range []Msg{NewMsg([]byte("a")), big, NewMsg([]byte("b"))} {
		if !q.push(m, msgBytes(m)) {
			t.Fatal("push refused")
		}
	}
	got, n, isBig := q.takeSmall(make([]Msg, 0, 16), 0, true)
	if isBig || len(got) != 1 || string(got[0].Frames[0]) != "a" {
		t.Fatalf("first take: %d messages (big %v), want only the small one", len(got), isBig)
	}
	got, _, isBig = q.takeSmall(make([]Msg, 0, 16), n, true)
	if !isBig || len(got) != 0 {
		t.Fatalf("second take: %d messages (big %v), want none and big", len(got), isBig)
	}
}
