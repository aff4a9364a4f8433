package socket

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// memConn is one end of a buffered in-memory full-duplex connection used by
// inproc://. Unlike net.Pipe, writes complete as long as the buffer has
// room, so both sides may write their greetings at the same time. It
// supports deadlines and half-close.
type memConn struct {
	rx, tx        *memHalf
	local, remote net.Addr
	rd, wd        *memDeadline
	once          sync.Once
	done          chan struct{}
}

const memBuf = 256 << 10

type memHalf struct {
	mu      sync.Mutex
	buf     []byte // fixed storage; bytes r..w are unread
	r, w    int
	wclosed bool // writer finished: reader sees EOF once drained
	rclosed bool // reader gone: writes fail
	data    chan struct{}
	space   chan struct{}
}

func newMemHalf() *memHalf {
	return &memHalf{data: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

// signal sends on a capacity-1 channel unless a signal is already pending.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func memPipe(a, b net.Addr) (*memConn, *memConn) {
	h1, h2 := newMemHalf(), newMemHalf()
	c1 := &memConn{rx: h1, tx: h2, local: a, remote: b, rd: newMemDeadline(), wd: newMemDeadline(), done: make(chan struct{})}
	c2 := &memConn{rx: h2, tx: h1, local: b, remote: a, rd: newMemDeadline(), wd: newMemDeadline(), done: make(chan struct{})}
	return c1, c2
}

func (c *memConn) Read(p []byte) (int, error) {
	for {
		h := c.rx
		h.mu.Lock()
		if h.rclosed {
			h.mu.Unlock()
			return 0, net.ErrClosed
		}
		if h.w > h.r {
			n := copy(p, h.buf[h.r:h.w])
			h.r += n
			if h.r == h.w {
				h.r, h.w = 0, 0
			}
			h.mu.Unlock()
			signal(h.space)
			return n, nil
		}
		if h.wclosed {
			h.mu.Unlock()
			return 0, io.EOF
		}
		h.mu.Unlock()
		select {
		case <-h.data:
		case <-c.done:
			return 0, net.ErrClosed
		case <-c.rd.wait():
			return 0, os.ErrDeadlineExceeded
		}
	}
}

func (c *memConn) Write(p []byte) (int, error) {
	total := 0
	for {
		h := c.tx
		h.mu.Lock()
		if h.wclosed {
			h.mu.Unlock()
			return total, net.ErrClosed
		}
		if h.rclosed {
			h.mu.Unlock()
			return total, io.ErrClosedPipe
		}
		if h.buf == nil {
			h.buf = make([]byte, memBuf)
		}
		if h.w == len(h.buf) && h.r > 0 {
			h.w = copy(h.buf, h.buf[h.r:h.w])
			h.r = 0
		}
		n := copy(h.buf[h.w:], p)
		h.w += n
		p = p[n:]
		total += n
		h.mu.Unlock()
		if n > 0 {
			signal(h.data)
		}
		if len(p) == 0 {
			return total, nil
		}
		select {
		case <-h.space:
		case <-c.done:
			return total, net.ErrClosed
		case <-c.wd.wait():
			return total, os.ErrDeadlineExceeded
		}
	}
}

// isMemConn reports whether c is an inproc pipe.
func isMemConn(c net.Conn) bool {
	_, ok := c.(*memConn)
	return ok
}

// tryWrite writes what fits in the buffer now, without waiting for room.
func (c *memConn) tryWrite(p []byte) (int, error) {
	h := c.tx
	h.mu.Lock()
	if h.wclosed {
		h.mu.Unlock()
		return 0, net.ErrClosed
	}
	if h.rclosed {
		h.mu.Unlock()
		return 0, io.ErrClosedPipe
	}
	if h.buf == nil {
		h.buf = make([]byte, memBuf)
	}
	if h.w == len(h.buf) && h.r > 0 {
		h.w = copy(h.buf, h.buf[h.r:h.w])
		h.r = 0
	}
	n := copy(h.buf[h.w:], p)
	h.w += n
	h.mu.Unlock()
	if n > 0 {
		signal(h.data)
	}
	return n, nil
}

// CloseWrite half-closes: the peer reads what is buffered, then EOF.
func (c *memConn) CloseWrite() error {
	c.tx.mu.Lock()
	c.tx.wclosed = true
	c.tx.mu.Unlock()
	signal(c.tx.data)
	return nil
}

func (c *memConn) Close() error {
	c.once.Do(func() {
		close(c.done)
		c.CloseWrite()
		c.rx.mu.Lock()
		c.rx.rclosed = true
		c.rx.r, c.rx.w = 0, 0
		c.rx.mu.Unlock()
		signal(c.rx.space)
	})
	return nil
}

func (c *memConn) LocalAddr() net.Addr  { return c.local }
func (c *memConn) RemoteAddr() net.Addr { return c.remote }
func (c *memConn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}
func (c *memConn) SetReadDeadline(t time.Time) error  { c.rd.set(t); return nil }
func (c *memConn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }

// memDeadline is a resettable deadline whose wait channel is closed when
// it passes (the same design as net.Pipe's).
type memDeadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{}
}

func newMemDeadline() *memDeadline { return &memDeadline{cancel: make(chan struct{})} }

func (d *memDeadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer fired and closed cancel; wait is over
	}
	d.timer = nil
	closed := false
	select {
	case <-d.cancel:
		closed = true
	default:
	}
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		c := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(c) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

func (d *memDeadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}
