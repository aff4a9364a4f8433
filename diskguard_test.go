package fastmq_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/spool"
)

// guardNode starts a node whose disk guard checks every 10 ms.
func guardNode(t *testing.T, dir string, g fastmq.DiskGuard, segBytes int64) *fastmq.Node {
	t.Helper()
	g.Interval = 10 * time.Millisecond
	n, err := fastmq.New(fastmq.Config{Name: "g", DataDir: dir, DiskGuard: g, Spool: spool.Config{SegmentBytes: segBytes}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// appendKB appends count records of 1 KiB to stream, in batches of 16.
func appendKB(n *fastmq.Node, stream string, count int) error {
	recs := make([]spool.Record, 16)
	for i := range recs {
		recs[i].Value = make([]byte, 1024)
	}
	for ; count > 0; count -= len(recs) {
		if _, err := n.Append(context.Background(), stream, recs...); err != nil {
			return err
		}
	}
	return nil
}

// TestDiskGuardMinFree: with the zero DiskGuard, appends are refused while
// the disk (a small tmpfs) has less than 5 % free, with an error naming
// that limit, and accepted again once space is freed.
func TestDiskGuardMinFree(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount: %v: %s", err, out)
		}
	})
	n := guardNode(t, filepath.Join(dir, "node"), fastmq.DiskGuard{}, 0)
	publish(t, n, "s", 1)
	// Fill the disk to under 5 % free (400 KiB of 8 MiB).
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = f.Write(make([]byte, 64<<10))
	}
	f.Close()
	var refused error
	testutil.WaitFor(t, "appends refused", 0, func() bool {
		_, refused = n.Publish(context.Background(), "s", []byte("x"))
		return refused != nil
	})
	if !errors.Is(refused, fastmq.ErrDiskFull) || !strings.Contains(refused.Error(), "free") || !strings.Contains(refused.Error(), "MinFreePercent") {
		t.Fatalf("refused with %v, want ErrDiskFull naming the free space limit", refused)
	}
	if st := n.Status().DiskGuard; st.Refusing == "" || st.Refused == 0 || st.Policy != "refuse" {
		t.Fatalf("disk guard status %+v", st)
	}
	srv := httptest.NewServer(nodeHTTP(n))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"fastmq_disk_free_bytes ", "fastmq_disk_total_bytes 8.388608e+06", "fastmq_disk_guard_refusing 1", `fastmq_stream_bytes{stream="s"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "appends accepted again", 0, func() bool {
		_, err := n.Publish(context.Background(), "s", []byte("x"))
		return err == nil
	})
}

// TestDiskGuardMaxBytesRefuse: the spools together may not pass MaxBytes.
func TestDiskGuardMaxBytesRefuse(t *testing.T) {
	n := guardNode(t, t.TempDir(), fastmq.DiskGuard{MaxBytes: 64 << 10, MinFreePercent: -1}, 16<<10)
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		err = appendKB(n, "s", 16)
	}
	if !errors.Is(err, fastmq.ErrDiskFull) || !strings.Contains(err.Error(), "MaxBytes") {
		t.Fatalf("appends ended with %v, want ErrDiskFull naming MaxBytes", err)
	}
	if _, err := n.PublishAsync(context.Background(), "s", []byte("x")); !errors.Is(err, fastmq.ErrDiskFull) {
		t.Fatalf("PublishAsync: %v, want ErrDiskFull", err)
	}
}

// TestDiskGuardDropOldest: under DiskDropOldest the oldest segments of the
// largest stream go, appends go on, and the smaller stream is left alone.
func TestDiskGuardDropOldest(t *testing.T) {
	const max = 96 << 10
	n := guardNode(t, t.TempDir(), fastmq.DiskGuard{MaxBytes: max, MinFreePercent: -1, Policy: fastmq.DiskDropOldest}, 16<<10)
	if err := appendKB(n, "small", 16); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if err := appendKB(n, "big", 16); err != nil {
			t.Fatalf("append %d: %v (DropOldest refuses nothing it can drop)", i, err)
		}
	}
	testutil.WaitFor(t, "the spools back under MaxBytes", 0, func() bool {
		st := n.Status()
		var total int64
		for _, s := range st.Streams {
			total += s.Bytes
		}
		return total < max && st.DiskGuard.DroppedSegments > 0
	})
	for _, s := range n.Status().Streams {
		if s.Name == "small" && s.Oldest != 0 {
			t.Fatalf("the smaller stream lost records: %+v", s)
		}
		if s.Name == "big" && (s.Oldest == 0 || s.Next != 320) {
			t.Fatalf("the big stream kept its oldest records: %+v", s)
		}
	}
}
