// Package faultproxy is a userspace TCP fault proxy for tests: it forwards
// connections from a listener to a target and, on the way, delays every
// chunk it reads, stalls some chunks as a lost segment would, and resets
// some connections. It stands in for netem where the kernel has none.
//
// What it emulates. Delay is a one-way latency added to each chunk (one
// read of up to 32 KiB) in each direction, in order, without limiting
// throughput: a chunk read at t is written at t+Delay. Loss on a TCP
// stream is not lost bytes but a stall: the kernel retransmits, and the
// stream waits about one retransmission timeout (at least 200 ms on
// Linux); with probability Loss a chunk waits Stall longer, and every
// chunk behind it in that direction waits too. With probability Reset a
// chunk is dropped instead and both sides of the connection are reset
// (RST), as a middlebox that lost its state would.
package faultproxy

import (
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Proxy.
type Config struct {
	// Listen is the address to accept on ("host:port"; port 0 picks one).
	Listen string
	// Target is the address each accepted connection is forwarded to.
	Target string
	// Delay is added to every chunk, in both directions.
	Delay time.Duration
	// Loss is the probability (0 to 1) that a chunk stalls for Stall.
	Loss float64
	// Stall is how long a lost chunk waits. Default 200 ms.
	Stall time.Duration
	// Reset is the probability (0 to 1) that a chunk resets its connection.
	Reset float64
}

// Stats are a proxy's counters.
type Stats struct {
	Accepted uint64 // connections accepted
	Chunks   uint64 // chunks forwarded
	Stalls   uint64 // chunks stalled (emulated loss)
	Resets   uint64 // connections reset
}

// Proxy forwards connections with faults. It is safe for concurrent use;
// Close stops it and returns after every goroutine it started has exited.
type Proxy struct {
	cfg Config
	ln  net.Listener
	wg  sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool

	accepted, chunks, stalls, resets atomic.Uint64
}

// New listens on cfg.Listen and starts forwarding to cfg.Target.
func New(cfg Config) (*Proxy, error) {
	if cfg.Target == "" {
		return nil, errors.New("faultproxy: no target")
	}
	if cfg.Loss < 0 || cfg.Loss > 1 || cfg.Reset < 0 || cfg.Reset > 1 || cfg.Delay < 0 {
		return nil, errors.New("faultproxy: probabilities must be in [0, 1] and Delay not negative")
	}
	if cfg.Stall <= 0 {
		cfg.Stall = 200 * time.Millisecond
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, ln: ln, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	return Stats{Accepted: p.accepted.Load(), Chunks: p.chunks.Load(), Stalls: p.stalls.Load(), Resets: p.resets.Load()}
}

// Close stops accepting, closes every connection and waits for every
// goroutine. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.ln.Close()
		for c := range p.conns {
			c.Close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// track registers c for Close; false if the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.accepted.Add(1)
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve dials the target for the accepted connection a and runs both
// directions until either ends or a reset.
func (p *Proxy) serve(a net.Conn) {
	defer p.wg.Done()
	defer p.untrack(a)
	defer a.Close()
	b, err := net.DialTimeout("tcp", p.cfg.Target, 5*time.Second)
	if err != nil || !p.track(b) {
		if b != nil {
			b.Close()
		}
		return
	}
	defer p.untrack(b)
	defer b.Close()
	var once sync.Once
	reset := func() {
		once.Do(func() {
			p.resets.Add(1)
			for _, c := range []net.Conn{a, b} {
				if tc, ok := c.(*net.TCPConn); ok {
					tc.SetLinger(0) // close sends RST
				}
				c.Close()
			}
		})
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(b, a, reset) }()
	go func() { defer wg.Done(); p.pipe(a, b, reset) }()
	wg.Wait()
}

// chunk is one read, due to be written at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst with faults: a reader goroutine stamps chunks
// with their due time and a writer (this goroutine) writes them in order
// when due. It ends when src ends or fails (closing dst's write side) or
// a write fails.
func (p *Proxy) pipe(dst, src net.Conn, reset func()) {
	q := make(chan chunk, 64)
	done := make(chan struct{})
	go func() {
		defer close(q)
		due := time.Time{}
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				if p.cfg.Reset > 0 && rand.Float64() < p.cfg.Reset {
					reset()
					return
				}
				d := time.Now().Add(p.cfg.Delay)
				if p.cfg.Loss > 0 && rand.Float64() < p.cfg.Loss {
					p.stalls.Add(1)
					d = d.Add(p.cfg.Stall)
				}
				if d.Before(due) {
					d = due // in order: nothing overtakes a stalled chunk
				}
				due = d
				select {
				case q <- chunk{buf[:n], d}:
				case <-done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		close(done)
		for range q { // let the reader end (src is closed by then or soon)
		}
	}()
	for c := range q {
		if w := time.Until(c.due); w > 0 {
			time.Sleep(w) // the emulated delay itself, not synchronisation
		}
		if _, err := dst.Write(c.data); err != nil {
			src.Close()
			return
		}
		p.chunks.Add(1)
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		tc.CloseWrite()
	} else {
		dst.Close()
	}
}
