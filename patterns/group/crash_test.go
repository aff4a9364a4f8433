package group_test

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// crashChildEnv makes the test binary run a publisher and three members
// over the directory it names (runCrashChild), so that the kill -9 test
// kills a real process.
const crashChildEnv = "FASTMQ_GROUP_CRASH_CHILD"

const crashRecords = 6000

// runCrashChild serves the group of the stream s in dir and acks its
// records with three members, printing each offset once its ack is
// confirmed, until it is killed.
func runCrashChild(dir string) int {
	l, err := spool.Open(spool.Config{Dir: filepath.Join(dir, "streams", "s")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 1
	}
	lookup := func(s string) (*spool.Log, bool) { return l, s == "s" }
	srv, err := pull.NewServer(pull.ServerConfig{Lookup: lookup})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 1
	}
	gs, err := group.NewServer(group.ServerConfig{Dir: filepath.Join(dir, "groups"), Lookup: lookup,
		Open: func(string) (*spool.Log, error) { return l, nil }, Send: srv})
	if err == nil {
		err = group.Register(srv, gs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 1
	}
	var out sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for i := range 3 {
		m, err := group.NewMember(group.MemberConfig{Stream: "s", Group: "g", Name: fmt.Sprintf("m%d", i),
			Buffer: 64, Publishers: map[string]string{"p": srv.Endpoints()[0]}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "crash child:", err)
			return 1
		}
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					msg, err := m.Next(context.Background())
					if err != nil {
						return
					}
					if msg.Ack(context.Background()) == nil {
						out.Lock()
						fmt.Fprintln(w, msg.Offset)
						w.Flush()
						out.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait() // until killed
	return 0
}

// A publisher killed with SIGKILL while three members ack recovers, from
// its snapshot and journal, every ack it confirmed: none of those records
// is delivered again, and every other record is.
func TestCrashKeepsConfirmedAcks(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	dir := t.TempDir()
	p := newPublisher(t, dir)
	p.publish(t, "s", crashRecords)
	p.close()

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(exe, "-test.run=^$")
	c.Env = append(os.Environ(), crashChildEnv+"="+dir)
	c.Stderr = os.Stderr
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			c.Process.Kill()
			c.Wait()
		}
	})
	// Read confirmed acks; kill the child mid-run, after 2000.
	acked := map[uint64]bool{}
	lines := make(chan string)
	go func() {
		defer close(lines)
		r := bufio.NewReader(stdout)
		for {
			s, err := r.ReadString('\n')
			if err != nil {
				return // EOF: a last line without its newline was never confirmed
			}
			lines <- strings.TrimSpace(s)
		}
	}()
	deadline := time.After(2 * time.Minute)
	for len(acked) < 2000 {
		select {
		case s, ok := <-lines:
			if !ok {
				t.Fatalf("the child ended after %d acks", len(acked))
			}
			o, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("child printed %q", s)
			}
			acked[o] = true
		case <-deadline:
			t.Fatalf("the child confirmed %d acks in 2 minutes", len(acked))
		}
	}
	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed = true
	for s := range lines { // confirmed before the kill
		o, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("child printed %q", s)
		}
		acked[o] = true
	}
	c.Wait()
	if len(acked) >= crashRecords {
		t.Fatalf("the child acked all %d records before the kill", len(acked))
	}
	journals, _ := filepath.Glob(filepath.Join(dir, "groups", "s", "g.*.journal"))
	if len(journals) == 0 {
		t.Fatal("no journal after the crash")
	}

	p2 := newPublisher(t, dir)
	if _, err := p2.open("s"); err != nil {
		t.Fatal(err)
	}
	m := member(t, group.MemberConfig{Name: "after", Buffer: 256}, p2)
	var mu sync.Mutex
	var again []uint64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx, 16, func(_ context.Context, msg *group.Message) error {
			mu.Lock()
			again = append(again, msg.Offset)
			mu.Unlock()
			return nil
		})
	}()
	testutil.WaitFor(t, "every record settled after the restart", time.Minute, func() bool {
		return p2.groups.Stats()["s/g"].Floor == crashRecords
	})
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for _, o := range again {
		if acked[o] {
			t.Fatalf("offset %d delivered after the crash though its ack was confirmed", o)
		}
	}
	if len(again) == 0 {
		t.Fatal("nothing delivered after the crash")
	}
	t.Logf("%d acks confirmed before the kill, %d records delivered after it", len(acked), len(again))
}

// copyDir copies a live publisher's directory (or part), as a crash
// leaves it: the files as they are on disk at that moment; a file that
// goes while it walks (a temporary file renamed) is skipped.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The crash rule: after a publisher crash, no record whose ack was
// confirmed is redelivered; the records leased and unconfirmed at the
// crash come back.
func TestCrashRedeliversOnlyInFlight(t *testing.T) {
	dir := t.TempDir()
	p := newPublisher(t, dir)
	p.publish(t, "s", 100)
	ctx := context.Background()
	m := member(t, group.MemberConfig{Name: "a", Buffer: 8}, p)
	acked := map[uint64]bool{}
	leased := map[uint64]bool{}
	for i := 0; i < 60; i++ {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leased[msg.Offset] = true
		if i%3 != 2 { // two of three acked, confirmed
			if err := msg.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			acked[msg.Offset] = true
		}
	}
	crash := filepath.Join(t.TempDir(), "crash")
	copyDir(t, dir, crash) // the disk at the crash; the publisher never closed
	m.Close()

	p2 := newPublisher(t, crash)
	p2.open("s")
	m2 := member(t, group.MemberConfig{Name: "b"}, p2)
	got := map[uint64]bool{}
	for len(got)+len(acked) < 100 {
		msg, err := m2.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if acked[msg.Offset] {
			t.Fatalf("offset %d redelivered after the crash though its ack was confirmed", msg.Offset)
		}
		if got[msg.Offset] {
			t.Fatalf("offset %d delivered twice after the crash", msg.Offset)
		}
		if leased[msg.Offset] && msg.Delivery != 2 {
			t.Fatalf("offset %d, leased once before the crash, came back as delivery %d, want 2", msg.Offset, msg.Delivery)
		}
		got[msg.Offset] = true
		if err := msg.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for o := range leased {
		if !acked[o] && !got[o] {
			t.Errorf("offset %d, leased and not acked at the crash, was not redelivered", o)
		}
	}
	testutil.WaitFor(t, "the group's floor at the end", 0, func() bool { return p2.groups.Stats()["s/g"].Floor == 100 })
}
