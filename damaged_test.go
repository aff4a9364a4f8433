package fastmq_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/metrics"
	"github.com/fastmq/fastmq/spool"
)

// TestDamagedStreamDoesNotStopNode proves that one damaged spool on disk
// does not keep a node from starting: the healthy stream is served and
// consumed, the damaged one is reported in Status and the metrics, and once
// repaired it opens on the next use.
func TestDamagedStreamDoesNotStopNode(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"good", "bad"} {
		l, err := spool.Open(spool.Config{Dir: filepath.Join(dir, "streams", name), Sync: spool.SyncEach})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ { // two batches: damage in the first is not a torn tail
			if _, err := l.Append(context.Background(), spool.Record{Value: []byte(strings.Repeat("x", 100))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "streams", "bad", "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments of bad: %v", segs)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[32+48+10] ^= 0xff // a payload byte of the first batch
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}

	n, err := fastmq.New(fastmq.Config{Name: "n", DataDir: dir})
	if err != nil {
		t.Fatalf("a damaged stream stopped the node: %v", err)
	}
	defer n.Close()

	st := n.Status()
	byName := map[string]fastmq.StreamStatus{}
	for _, s := range st.Streams {
		byName[s.Name] = s
	}
	if s := byName["good"]; s.Error != "" || s.Next != 2 {
		t.Errorf("good stream: %+v, want served with next 2", s)
	}
	if s := byName["bad"]; s.Error == "" {
		t.Errorf("bad stream: %+v, want an error", s)
	}
	if _, err := n.Stream("bad"); !errors.As(err, new(*spool.CorruptError)) {
		t.Errorf("Stream(bad) = %v, want a CorruptError", err)
	}
	rec := httptest.NewRecorder()
	metrics.NodeHandler(n).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	m, _ := io.ReadAll(rec.Body)
	for _, want := range []string{`fastmq_stream_failed{stream="bad"} 1`, `fastmq_stream_failed{stream="good"} 0`} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %q", want)
		}
	}

	// The healthy stream is consumed as usual.
	c, err := n.Consume(fastmq.ConsumerConfig{Stream: "good", Name: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 2; i++ {
		msg, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("record %d of good: %v", i, err)
		}
		c.Ack(msg)
	}

	// Repaired, the damaged stream opens on its next use.
	if _, err := spool.Repair(filepath.Join(dir, "streams", "bad"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Stream("bad"); err != nil {
		t.Fatalf("after repair: %v", err)
	}
	for _, s := range n.Status().Streams {
		if s.Error != "" {
			t.Errorf("after repair, %s still reports %q", s.Name, s.Error)
		}
	}
}

// TestStreamsBeyondGossipBudget proves a node whose stream names do not all
// fit in the 512-byte gossip tags (four names of 128 characters) starts,
// serves every stream, and a consumer elsewhere in the mesh gets the
// records of a stream its advertisement could not list; a consumer of a
// stream the node does not have sees no error from it.
func TestStreamsBeyondGossipBudget(t *testing.T) {
	pub := newNode(t, "pub")
	var streams []string
	for i := range 4 {
		name := string(rune('a'+i)) + strings.Repeat("x", 127)
		streams = append(streams, name)
		if _, err := pub.Publish(context.Background(), name, []byte(name[:1])); err != nil {
			t.Fatalf("publish to stream %d: %v", i, err)
		}
	}
	cons := newNode(t, "cons", pub.GossipAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, st := range streams {
		c, err := cons.Consume(fastmq.ConsumerConfig{Stream: st, Name: "reader"})
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		if m.Publisher != "pub" || string(m.Value) != st[:1] {
			t.Fatalf("stream %d: got %q from %s", i, m.Value, m.Publisher)
		}
		c.Close()
	}
	other, err := cons.Consume(fastmq.ConsumerConfig{Stream: "elsewhere", Name: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	short, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	if _, err := other.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("consumer of a stream nobody has: Next = %v, want only its deadline", err)
	}
	if err := other.Err(); err != nil {
		t.Fatalf("consumer of a stream nobody has: Err = %v", err)
	}
}

// lockedBuffer is an io.Writer for a slog handler that tests read.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestDamagedStreamServedReadOnly proves a stream damaged in the middle
// (a byte flipped in a batch that valid batches follow, which spool.Open
// refuses) is served read-only up to the damage: a consumer gets every
// record before it, an append is refused with ErrStreamDamaged, and
// Status, the metrics and an ERROR line in the log name it.
func TestDamagedStreamServedReadOnly(t *testing.T) {
	dir := t.TempDir()
	sdir := filepath.Join(dir, "streams", "bad")
	l, err := spool.Open(spool.Config{Dir: sdir, Sync: spool.SyncEach})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ { // one record a batch
		if _, err := l.Append(context.Background(), spool.Record{Value: []byte(fmt.Sprintf("%03d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(sdir, "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments: %v, want one", segs)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff // a byte in the middle of the segment
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}

	var logs lockedBuffer
	n, err := fastmq.New(fastmq.Config{Name: "n", DataDir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("a damaged stream stopped the node: %v", err)
	}
	defer n.Close()

	if !strings.Contains(logs.String(), "level=ERROR msg=\"stream damaged") || !strings.Contains(logs.String(), "stream=bad") {
		t.Errorf("no ERROR line names the damaged stream:\n%s", logs.String())
	}
	var st fastmq.StreamStatus
	for _, s := range n.Status().Streams {
		if s.Name == "bad" {
			st = s
		}
	}
	if !st.Damaged || st.Error == "" {
		t.Errorf("status of bad: %+v, want damaged with its error", st)
	}
	_, err = n.Publish(context.Background(), "bad", []byte("more"))
	if !errors.Is(err, fastmq.ErrStreamDamaged) || !errors.As(err, new(*spool.CorruptError)) {
		t.Errorf("append to the damaged stream: %v, want ErrStreamDamaged and a CorruptError", err)
	}
	rec := httptest.NewRecorder()
	metrics.NodeHandler(n).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if m, _ := io.ReadAll(rec.Body); !strings.Contains(string(m), `fastmq_stream_damaged{stream="bad"} 1`) {
		t.Errorf("metrics lack fastmq_stream_damaged for bad")
	}

	// Every record before the damage is served.
	var ce *spool.CorruptError
	if !errors.As(err, &ce) || ce.Offset == 0 {
		t.Fatalf("damage %v: want one past offset 0", err)
	}
	c, err := n.Consume(fastmq.ConsumerConfig{Stream: "bad", Name: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := uint64(0); i < ce.Offset; i++ {
		msg, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("record %d of %d before the damage: %v", i, ce.Offset, err)
		}
		if want := fmt.Sprintf("%03d", i); msg.Offset != i || string(msg.Value) != want {
			t.Fatalf("got offset %d %q, want %d %q", msg.Offset, msg.Value, i, want)
		}
		c.Ack(msg)
	}
}
