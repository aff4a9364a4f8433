package socket

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/fastmq/fastmq/internal/zmtp"
)

// relay is a TCP man in the middle between a client and a server: it
// records what the client sends and can corrupt or replay it.
type relay struct {
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	seen bytes.Buffer // everything the client sent
	last []byte       // the client's last write
	fwd  net.Conn     // to the server
	flip bool         // corrupt the client's next write
}

func newRelay(t *testing.T, server string) *relay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		s, err := net.Dial("tcp", strings.TrimPrefix(server, "tcp://"))
		if err != nil {
			return
		}
		defer s.Close()
		r.mu.Lock()
		r.fwd = s
		r.mu.Unlock()
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			_, _ = io.Copy(c, s)
			c.Close()
		}()
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				r.mu.Lock()
				b := bytes.Clone(buf[:n])
				r.seen.Write(b)
				r.last = bytes.Clone(b)
				if r.flip {
					b[len(b)-1] ^= 0x20
					r.flip = false
				}
				_, werr := s.Write(b)
				r.mu.Unlock()
				if werr != nil {
					return
				}
			}
			if err != nil {
				s.Close()
				return
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		r.mu.Lock()
		if r.fwd != nil {
			r.fwd.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

func (r *relay) endpoint() string { return "tcp://" + r.ln.Addr().String() }

// TestCurveRelay: a man in the middle sees no plaintext, and a flipped
// byte or a replayed MESSAGE ends the connection instead of reaching the
// application.
func TestCurveRelay(t *testing.T) {
	for _, attack := range []string{"flip", "replay"} {
		t.Run(attack, func(t *testing.T) {
			ctx := tctx(t)
			spub, ssec := mustKeys(t)
			pull := mk(t, Pull, Config{CurveServer: true, CurveAllowAnyClient: true, CurveSecretKey: ssec})
			r := newRelay(t, bind(t, pull, "tcp://127.0.0.1:0"))
			push := mk(t, Push, Config{CurveServerKey: spub, ReconnectInterval: 1 << 40})
			connect(t, push, r.endpoint())
			waitEv(t, pull, EventAccepted)
			mustSend(t, ctx, push, "the plaintext secret")
			eq(t, mustRecv(t, ctx, pull), "the plaintext secret")

			r.mu.Lock()
			if bytes.Contains(r.seen.Bytes(), []byte("plaintext secret")) {
				r.mu.Unlock()
				t.Fatal("plaintext on the wire")
			}
			switch attack {
			case "flip":
				r.flip = true
				r.mu.Unlock()
				mustSend(t, ctx, push, "tampered")
			case "replay":
				_, err := r.fwd.Write(r.last)
				r.mu.Unlock()
				if err != nil {
					t.Fatal(err)
				}
			}
			ev := waitEv(t, pull, EventDisconnected)
			if !errors.Is(ev.Err, zmtp.ErrCurve) {
				t.Fatalf("disconnect: %v", ev)
			}
			if attack == "replay" && !strings.Contains(ev.Err.Error(), "replayed") {
				t.Fatalf("disconnect: %v", ev)
			}
			// The reader hands over what it read before it ends.
			if n := pull.queued(); n != 0 {
				t.Fatalf("%d messages got through the attack", n)
			}
		})
	}
}
