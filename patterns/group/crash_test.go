package group_test

import (
	"bufio"
	"context"
	"fmt"
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
