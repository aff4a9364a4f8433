package fastmq_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// The end-to-end tests re-execute the test binary as child processes that
// run a publisher or a consumer node, and kill them with SIGKILL.
const childEnv = "FASTMQ_E2E_CHILD"

func runChild() {
	role := os.Getenv(childEnv)
	name := os.Getenv("FASTMQ_E2E_NAME")
	data := os.Getenv("FASTMQ_E2E_DATA")
	seeds := strings.Split(os.Getenv("FASTMQ_E2E_SEEDS"), ",")
	n, err := fastmq.New(fastmq.Config{Name: name, DataDir: data, Seeds: seeds, RetryJoin: true})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	ctx := context.Background()
	switch role {
	case "publisher":
		l, err := n.Stream("e2e")
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(2)
		}
		fmt.Fprintln(out, "READY", l.NextOffset())
		out.Flush()
		limit, _ := strconv.ParseUint(os.Getenv("FASTMQ_E2E_LIMIT"), 10, 64)
		for next := l.NextOffset(); limit == 0 || next < limit; {
			k := 1 + rand.IntN(200)
			recs := make([]spool.Record, k)
			for i := range recs {
				recs[i].Value = []byte(fmt.Sprintf("%s:%d", name, next+uint64(i)))
			}
			first, err := l.Append(ctx, recs...)
			if err != nil {
				fmt.Fprintln(out, "ERR", err)
				out.Flush()
				os.Exit(2)
			}
			if first != next {
				fmt.Fprintln(out, "ERR offset", first, "want", next)
				out.Flush()
				os.Exit(2)
			}
			next += uint64(k)
			fmt.Fprintln(out, "ACK", first, k)
			out.Flush()
		}
		fmt.Fprintln(out, "DONE")
		out.Flush()
		select {} // keep serving until killed
	case "consumer":
		c, err := n.Consume(fastmq.ConsumerConfig{Stream: "e2e", Name: "c", Pull: pull.ConsumerConfig{CommitInterval: 50 * time.Millisecond}})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(2)
		}
		fmt.Fprintln(out, "READY")
		out.Flush()
		for {
			m, err := c.Next(ctx)
			if err != nil {
				fmt.Fprintln(out, "ERR", err)
				out.Flush()
				os.Exit(2)
			}
			fmt.Fprintln(out, "GOT", m.Publisher, m.Offset, string(m.Value))
			out.Flush()
			c.Ack(m)
			if m.Offset%50 == 0 {
				time.Sleep(time.Millisecond) // a consumer with work to do: commits happen mid-stream
			}
		}
	}
	os.Exit(3)
}

type child struct {
	once  sync.Once
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
}

func startChild(t *testing.T, role, name, data string, seeds []string, extra ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, "FASTMQ_E2E_NAME="+name, "FASTMQ_E2E_DATA="+data,
		"FASTMQ_E2E_SEEDS="+strings.Join(seeds, ","))
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stderr = io.Discard
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 1<<18), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { c.kill() })
	return c
}

// kill sends SIGKILL and waits for the child and its output to end.
func (c *child) kill() {
	c.once.Do(func() {
		c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.done
		c.cmd.Wait()
	})
}

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild()
		return
	}
	if role := os.Getenv(crossHostEnv); role != "" {
		runCrossHostChild(role)
		return
	}
	if role := os.Getenv(faultLabEnv); role != "" {
		runFaultLabChild(role)
		return
	}
	goleak.VerifyTestMain(m)
}

// TestE2EPublisherKills runs two publisher processes and kills each with
// SIGKILL at random moments, restarting it on the same data; an in-process
// consumer must receive every acknowledged record of each, in order,
// exactly once.
func TestE2EPublisherKills(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	var logs testutil.LogBuffer // the consumer node's log, shown if the test fails
	cons, err := fastmq.New(fastmq.Config{Name: "consumer", DataDir: filepath.Join(dir, "consumer"),
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seeds := []string{cons.GossipAddr()}
	c, err := cons.Consume(fastmq.ConsumerConfig{Stream: "e2e", Name: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	// dump shows, while the publishers still run, what the consumer
	// knows of each (a link stopped, or running and getting nothing),
	// what gossip says of them, and the consumer node's log.
	dump := func() {
		for _, st := range c.Stats() {
			t.Logf("consumer's view of %s: %+v", st.Publisher, st)
		}
		for _, m := range cons.Membership().Members() {
			t.Logf("gossip member %s at %s: %v, services %+v, spool %+v", m.Name, m.Addr, m.Status, m.Services, m.Spool)
		}
		t.Logf("consumer node's log:\n%s", logs.String())
	}

	var mu sync.Mutex
	acked := map[string]uint64{} // publisher -> next offset acknowledged durable
	pubs := []string{"pub-a", "pub-b"}
	procs := map[string]*child{}
	var readers sync.WaitGroup
	start := func(name string) {
		p := startChild(t, "publisher", name, filepath.Join(dir, name), seeds)
		procs[name] = p
		readers.Add(1)
		go func() {
			defer readers.Done()
			for line := range p.lines {
				f := strings.Fields(line)
				if len(f) == 3 && f[0] == "ACK" {
					first, _ := strconv.ParseUint(f[1], 10, 64)
					k, _ := strconv.ParseUint(f[2], 10, 64)
					mu.Lock()
					acked[name] = first + k
					mu.Unlock()
				}
			}
		}()
	}
	for _, p := range pubs {
		start(p)
	}
	next := map[string]uint64{}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// receive delivers until every publisher's acked offset (read at the
	// time of the call) has arrived.
	receive := func(until map[string]uint64) {
		t.Helper()
		for {
			done := true
			for p, u := range until {
				if next[p] < u {
					done = false
				}
			}
			if done {
				return
			}
			m, err := c.Next(ctx)
			if err != nil {
				dump()
				t.Fatalf("next: %v (positions %v, want %v)", err, next, until)
			}
			if m.Offset != next[m.Publisher] {
				t.Fatalf("%s: offset %d, want %d", m.Publisher, m.Offset, next[m.Publisher])
			}
			if want := fmt.Sprintf("%s:%d", m.Publisher, m.Offset); string(m.Value) != want {
				t.Fatalf("%s@%d: value %q, want %q", m.Publisher, m.Offset, m.Value, want)
			}
			next[m.Publisher]++
			c.Ack(m)
		}
	}
	for round := 0; round < 4; round++ {
		victim := pubs[round%len(pubs)]
		// Let it publish for a random while, then kill it mid-append.
		target := map[string]uint64{}
		mu.Lock()
		for _, p := range pubs {
			target[p] = acked[p] + uint64(500+rand.IntN(3000))
		}
		mu.Unlock()
		for {
			mu.Lock()
			reached := acked[victim] >= target[victim]
			mu.Unlock()
			if reached {
				break
			}
			if ctx.Err() != nil {
				dump()
				t.Fatal("publisher made no progress")
			}
			time.Sleep(2 * time.Millisecond)
		}
		procs[victim].kill()
		mu.Lock()
		snapshot := map[string]uint64{victim: acked[victim]}
		mu.Unlock()
		start(victim)
		receive(snapshot)
	}
	mu.Lock()
	final := map[string]uint64{}
	for p, a := range acked {
		final[p] = a
	}
	mu.Unlock()
	receive(final)
	for _, p := range pubs {
		if next[p] == 0 {
			t.Fatalf("nothing from %s", p)
		}
	}
	for _, p := range procs {
		p.kill()
	}
	readers.Wait()
	t.Logf("received in order, exactly once: %v", next)
}

// TestE2EConsumerKills kills a consumer process at random moments; each
// restarted consumer must resume exactly at its last committed offset, so
// nothing is lost and duplicates are only the uncommitted tail.
func TestE2EConsumerKills(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	pub, err := fastmq.New(fastmq.Config{Name: "pub", DataDir: filepath.Join(dir, "pub")})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	const total = 20000
	recs := make([]spool.Record, 0, 1000)
	for i := 0; i < total; i += 1000 {
		recs = recs[:0]
		for j := i; j < i+1000; j++ {
			recs = append(recs, spool.Record{Value: []byte(fmt.Sprintf("v%d", j))})
		}
		if _, err := pub.Append(context.Background(), "e2e", recs...); err != nil {
			t.Fatal(err)
		}
	}
	seeds := []string{pub.GossipAddr()}
	cdir := filepath.Join(dir, "consumer")
	seen := make([]int, total)
	var committed uint64
	var dups int
	for round := 0; ; round++ {
		c := startChild(t, "consumer", "consumer", cdir, seeds)
		first := true
		stopAt := 1000 + rand.IntN(4000)
		got := 0
		var last uint64
		for line := range c.lines {
			f := strings.Fields(line)
			if len(f) == 0 || f[0] == "READY" {
				continue
			}
			if f[0] != "GOT" || len(f) != 4 {
				t.Fatalf("child said %q", line)
			}
			off, _ := strconv.ParseUint(f[2], 10, 64)
			if f[3] != fmt.Sprintf("v%d", off) {
				t.Fatalf("offset %d carries %q", off, f[3])
			}
			if first && off != committed {
				t.Fatalf("round %d: restarted consumer began at %d, last commit was %d", round, off, committed)
			}
			first = false
			if seen[off] > 0 {
				dups++
			}
			seen[off]++
			last = off
			got++
			if last == total-1 || (round < 3 && got >= stopAt) {
				// Kill it; what it printed before dying is still read.
				go c.kill()
			}
		}
		c.kill()
		store, err := spool.OpenOffsets(filepath.Join(cdir, "consumers", "c"))
		if err != nil {
			t.Fatal(err)
		}
		committed, _ = store.Get("pub", "e2e")
		store.Close()
		if committed > last+1 {
			t.Fatalf("committed %d beyond the last delivered %d", committed, last)
		}
		if last == total-1 {
			break
		}
		if round > 10 {
			t.Fatal("too many rounds")
		}
	}
	if dups >= total {
		t.Fatalf("%d duplicates for %d records: commits are not taking effect", dups, total)
	}
	for off, n := range seen {
		if n == 0 {
			t.Fatalf("offset %d never delivered", off)
		}
	}
	t.Logf("all %d records delivered; %d duplicates, all from uncommitted tails", total, dups)
}
