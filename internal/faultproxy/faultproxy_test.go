package faultproxy

import (
	"bufio"
	"github.com/fastmq/fastmq/internal/testutil"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo serves an echo server on loopback until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); io.Copy(c, c); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestDelay checks that a round trip through the proxy takes at least
// twice its delay and that the bytes arrive unchanged.
func TestDelay(t *testing.T) {
	p, err := New(Config{Listen: "127.0.0.1:0", Target: echo(t), Delay: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for i := 0; i < 3; i++ {
		start := time.Now()
		if _, err := c.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		l, err := r.ReadString('\n')
		if err != nil || l != "ping\n" {
			t.Fatalf("got %q, %v", l, err)
		}
		if rtt := time.Since(start); rtt < 60*time.Millisecond {
			t.Fatalf("round trip %v, want at least 60ms", rtt)
		}
	}
	// The proxy may count the last chunk just after it delivered it.
	testutil.WaitFor(t, "six chunks counted", 0, func() bool { return p.Stats().Chunks >= 6 })
	if s := p.Stats(); s.Accepted != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestLossStalls checks that with Loss 1 every chunk waits Stall more.
func TestLossStalls(t *testing.T) {
	p, err := New(Config{Listen: "127.0.0.1:0", Target: echo(t), Loss: 1, Stall: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	c.Write([]byte("x\n"))
	if l, err := bufio.NewReader(c).ReadString('\n'); err != nil || l != "x\n" {
		t.Fatalf("got %q, %v", l, err)
	}
	if rtt := time.Since(start); rtt < 100*time.Millisecond {
		t.Fatalf("round trip %v, want at least 100ms", rtt)
	}
	if s := p.Stats(); s.Stalls != 2 {
		t.Fatalf("stats %+v, want 2 stalls", s)
	}
}

// TestReset checks that a reset ends the client's connection with an
// error and that the proxy goes on accepting.
func TestReset(t *testing.T) {
	p, err := New(Config{Listen: "127.0.0.1:0", Target: echo(t), Reset: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("x\n"))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
			t.Fatal("read through a reset connection succeeded")
		}
		c.Close()
	}
	if s := p.Stats(); s.Resets != 2 || s.Accepted != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// TestCloseJoins checks that Close ends open connections and returns
// after every goroutine (goleak in TestMain checks the rest).
func TestCloseJoins(t *testing.T) {
	p, err := New(Config{Listen: "127.0.0.1:0", Target: echo(t), Delay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("x\n"))
	r := bufio.NewReader(c)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	p.Close()
	p.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("connection still open after Close")
	}
	if _, err := New(Config{Listen: "127.0.0.1:0"}); err == nil {
		t.Fatal("New without target succeeded")
	}
}
