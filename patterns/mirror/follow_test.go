package mirror_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/mirror"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openLog(t *testing.T, cfg spool.Config) *spool.Log {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	l, err := spool.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// publisher serves src as stream "s" on a loopback spool server.
func publisher(t *testing.T, src *spool.Log) string {
	t.Helper()
	srv, err := pull.NewServer(pull.ServerConfig{Lookup: func(name string) (*spool.Log, bool) { return src, name == "s" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Endpoints()[0]
}

// follow runs a Follower of ep's stream s into dst until the test ends.
func follow(t *testing.T, ep string, dst *spool.Log) (*mirror.Follower, <-chan error) {
	t.Helper()
	f, err := mirror.NewFollower(mirror.FollowerConfig{Endpoint: ep, Stream: "s", Log: dst, MaxBytes: 8 << 10, MaxWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Run(context.Background()) }()
	t.Cleanup(func() { f.Close() })
	return f, done
}

// identical checks that dst holds src's batches byte for byte.
func identical(t *testing.T, src, dst *spool.Log) {
	t.Helper()
	if s, d := src.NextOffset(), dst.NextOffset(); s != d {
		t.Fatalf("copy ends at %d, publisher at %d", d, s)
	}
	for from := uint64(0); from < src.NextOffset(); {
		a, an, err := src.ReadRaw(from, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		b, bn, err := dst.ReadRaw(from, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		n := min(len(a), len(b))
		if n == 0 || !bytes.Equal(a[:n], b[:n]) {
			t.Fatalf("the copy's bytes differ at offset %d", from)
		}
		from = min(an, bn)
	}
}

// TestFollowerCopies: a follower copies a publisher's stream over the pull
// protocol, byte for byte, while records keep coming; stopped and started
// again it resumes from the copy's end without a gap or a repeat.
func TestFollowerCopies(t *testing.T) {
	src := openLog(t, spool.Config{Codec: spool.CodecZstd, SegmentBytes: 64 << 10})
	dst := openLog(t, spool.Config{SegmentBytes: 40 << 10})
	ep := publisher(t, src)
	ctx := context.Background()
	appendSome := func(from, n int) {
		for i := from; i < from+n; i++ {
			if _, err := src.Append(ctx, spool.Record{Value: fmt.Appendf(nil, "record %d %s", i, bytes.Repeat([]byte("x"), i%300))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendSome(0, 500)
	f, done := follow(t, ep, dst)
	appendSome(500, 1500)
	testutil.WaitFor(t, "the copy caught up", 20*time.Second, func() bool { return dst.NextOffset() == src.NextOffset() })
	identical(t, src, dst)
	testutil.WaitFor(t, "lag 0", 5*time.Second, func() bool { return f.Lag() == 0 })
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, mirror.ErrClosed) {
		t.Fatalf("Run after Close: %v", err)
	}
	appendSome(2000, 300)
	_, done = follow(t, ep, dst)
	testutil.WaitFor(t, "the copy caught up again", 20*time.Second, func() bool { return dst.NextOffset() == src.NextOffset() })
	identical(t, src, dst)
	select {
	case err := <-done:
		t.Fatalf("Run ended: %v", err)
	default:
	}
}

// TestFollowerGap: a copy whose next records the publisher no longer
// holds stops with ErrGap rather than holding a gap.
func TestFollowerGap(t *testing.T) {
	src := openLog(t, spool.Config{SegmentBytes: 4 << 10})
	ctx := context.Background()
	for i := range 200 {
		if _, err := src.Append(ctx, spool.Record{Value: fmt.Appendf(nil, "%0100d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := src.DropOldestSegment(); err != nil {
		t.Fatal(err)
	}
	dst := openLog(t, spool.Config{})
	_, done := follow(t, publisher(t, src), dst)
	select {
	case err := <-done:
		if !errors.Is(err, mirror.ErrGap) {
			t.Fatalf("Run: %v, want ErrGap", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not stop at the gap")
	}
	if n := dst.NextOffset(); n != 0 {
		t.Fatalf("the copy holds %d records", n)
	}
}
