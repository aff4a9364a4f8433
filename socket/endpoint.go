package socket

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type endpoint struct {
	transport string // "tcp", "ipc", "inproc"
	addr      string // host:port, path or name
}

func (e endpoint) String() string { return e.transport + "://" + e.addr }

func parseEndpoint(s string, bind bool) (endpoint, error) {
	tr, addr, ok := strings.Cut(s, "://")
	if !ok || addr == "" {
		return endpoint{}, fmt.Errorf("%w: %q", ErrBadEndpoint, s)
	}
	e := endpoint{transport: strings.ToLower(tr), addr: addr}
	switch e.transport {
	case "tcp":
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return endpoint{}, fmt.Errorf("%w: %q: %v", ErrBadEndpoint, s, err)
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 0 || n > 65535 {
			if !(bind && port == "*") {
				return endpoint{}, fmt.Errorf("%w: %q: bad port", ErrBadEndpoint, s)
			}
			port, n = "0", 0
		}
		if !bind && (n == 0 || host == "*" || host == "") {
			return endpoint{}, fmt.Errorf("%w: %q: connect needs a host and a port", ErrBadEndpoint, s)
		}
		e.addr = net.JoinHostPort(host, port)
	case "ipc", "inproc":
	default:
		return endpoint{}, fmt.Errorf("%w: %q: unknown transport", ErrBadEndpoint, s)
	}
	return e, nil
}

// listen opens a listener for e and returns it with the resolved endpoint.
func listen(e endpoint) (net.Listener, string, error) {
	switch e.transport {
	case "tcp":
		host, port, _ := net.SplitHostPort(e.addr)
		wild := host == "*"
		if wild {
			host = ""
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, port))
		if err != nil {
			return nil, "", fmt.Errorf("socket: bind %s: %w", e, err)
		}
		a := l.Addr().(*net.TCPAddr)
		h := a.IP.String()
		if wild {
			h = "0.0.0.0"
		}
		return l, "tcp://" + net.JoinHostPort(h, strconv.Itoa(a.Port)), nil
	case "ipc":
		l, err := net.Listen("unix", e.addr)
		if err != nil && errors.Is(err, syscall.EADDRINUSE) {
			// Remove a stale socket file, but only if nobody listens on it.
			c, derr := net.DialTimeout("unix", e.addr, time.Second)
			if derr == nil {
				c.Close()
				return nil, "", fmt.Errorf("socket: bind %s: %w", e, err)
			}
			if fi, serr := os.Lstat(e.addr); serr == nil && fi.Mode()&os.ModeSocket != 0 {
				_ = os.Remove(e.addr)
				l, err = net.Listen("unix", e.addr)
			}
		}
		if err != nil {
			return nil, "", fmt.Errorf("socket: bind %s: %w", e, err)
		}
		return l, e.String(), nil
	case "inproc":
		l, err := inprocListen(e.addr)
		if err != nil {
			return nil, "", err
		}
		return l, e.String(), nil
	}
	return nil, "", fmt.Errorf("%w: %s", ErrBadEndpoint, e)
}

func dial(ctx context.Context, e endpoint) (net.Conn, error) {
	switch e.transport {
	case "tcp":
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", e.addr)
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		return c, nil
	case "ipc":
		var d net.Dialer
		return d.DialContext(ctx, "unix", e.addr)
	case "inproc":
		return inprocDial(ctx, e.addr)
	}
	return nil, fmt.Errorf("%w: %s", ErrBadEndpoint, e)
}

// inproc: an in-process registry of listeners handing out in-memory
// connections that run through the same codec as tcp and ipc.

var inproc struct {
	mu sync.Mutex
	m  map[string]*inprocListener
}

type inprocListener struct {
	name   string
	conns  chan net.Conn
	done   chan struct{}
	closed sync.Once
}

type inprocAddr string

func (a inprocAddr) Network() string { return "inproc" }
func (a inprocAddr) String() string  { return "inproc://" + string(a) }

func inprocListen(name string) (*inprocListener, error) {
	inproc.mu.Lock()
	defer inproc.mu.Unlock()
	if inproc.m == nil {
		inproc.m = make(map[string]*inprocListener)
	}
	if _, ok := inproc.m[name]; ok {
		return nil, fmt.Errorf("socket: bind inproc://%s: address in use", name)
	}
	l := &inprocListener{name: name, conns: make(chan net.Conn), done: make(chan struct{})}
	inproc.m[name] = l
	return l, nil
}

func (l *inprocListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *inprocListener) Close() error {
	l.closed.Do(func() {
		inproc.mu.Lock()
		if inproc.m[l.name] == l {
			delete(inproc.m, l.name)
		}
		inproc.mu.Unlock()
		close(l.done)
	})
	return nil
}

func (l *inprocListener) Addr() net.Addr { return inprocAddr(l.name) }

func inprocDial(ctx context.Context, name string) (net.Conn, error) {
	inproc.mu.Lock()
	l := inproc.m[name]
	inproc.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("socket: dial inproc://%s: %w", name, syscall.ECONNREFUSED)
	}
	a, b := memPipe(inprocAddr(name), inprocAddr(name))
	select {
	case l.conns <- b:
		return a, nil
	case <-l.done:
	case <-ctx.Done():
	}
	a.Close()
	b.Close()
	return nil, fmt.Errorf("socket: dial inproc://%s: %w", name, syscall.ECONNREFUSED)
}
