package socket_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/socket"
)

// TestInteropSlowloris: while 300 silent connections from ten source
// addresses are held open (each redialed as soon as it is dropped), five
// libzmq PUSH peers, one after the other, each get a message through to
// our PULL. In the attack run a libzmq peer failed 10 of 11 tries.
func TestInteropSlowloris(t *testing.T) {
	needPyzmq(t)
	pull := newSock(t, socket.Pull, socket.Config{})
	ep, err := pull.Bind("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(ep, "tcp://")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%10))}, Timeout: time.Second}
			for {
				if c, err := d.Dial("tcp", addr); err == nil {
					done := make(chan struct{})
					go func() {
						var b [64]byte
						for {
							if _, err := c.Read(b[:]); err != nil {
								close(done)
								return
							}
						}
					}()
					select {
					case <-done:
					case <-stop:
						c.Close()
						<-done
						return
					}
					c.Close()
				}
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}()
	}
	// Past 256 handshakes the socket starts evicting: the attack is on.
	testutil.WaitFor(t, "handshake slots full", 0, func() bool { return pull.Stats().HandshakeFailures > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 5 {
		start := time.Now()
		p := startPeer(t, "push", ep, "connect", "--count", "1")
		wantFrames(t, recvStrings(t, ctx, pull), "msg-0")
		t.Logf("libzmq peer's message arrived %v after it started", time.Since(start).Round(time.Millisecond))
		p.wait()
	}
}
