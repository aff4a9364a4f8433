package socket

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

type dialer struct {
	ep     endpoint
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	conn   net.Conn
	// serverKey is what CurveServerKeyFor gave for the attempt in
	// progress; keyErr its last error text (logged when it changes).
	// Only the dial loop touches them.
	serverKey CurveKey
	keyErr    string
}

// Connect starts connecting to endpoint in the background and returns at
// once; the connection is retried with exponential backoff whenever it
// fails or drops, until Disconnect or Close. It returns an error only for
// a malformed endpoint or a closed socket.
func (s *Socket) Connect(ep string) error {
	e, err := parseEndpoint(ep, false)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &dialer{ep: e, ctx: ctx, cancel: cancel}
	s.dialers[ep] = append(s.dialers[ep], d)
	s.wg.Add(1)
	go s.dialLoop(d, ep)
	return nil
}

// Disconnect stops connecting to an endpoint given to Connect and closes
// the connections made to it, discarding their queued messages.
func (s *Socket) Disconnect(ep string) error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return ErrClosed
	}
	ds := s.dialers[ep]
	delete(s.dialers, ep)
	s.mu.Unlock()
	if len(ds) == 0 {
		return fmt.Errorf("%w: %s is not connected", ErrBadEndpoint, ep)
	}
	for _, d := range ds {
		d.stop()
	}
	return nil
}

func (d *dialer) stop() {
	d.cancel()
	d.mu.Lock()
	if d.conn != nil {
		d.conn.Close()
	}
	d.mu.Unlock()
}

func (s *Socket) backoff(n int) time.Duration {
	d := s.cfg.ReconnectInterval
	for i := 0; i < n && d < s.cfg.ReconnectIntervalMax; i++ {
		d *= 2
	}
	if d > s.cfg.ReconnectIntervalMax {
		d = s.cfg.ReconnectIntervalMax
	}
	// Jitter: uniformly in [d/2, d].
	half := int64(d / 2)
	if half > 0 {
		d = time.Duration(half + rand.Int64N(half+1))
	}
	return d
}

// dialKeyed dials d's endpoint, once CurveServerKeyFor (if set) gave a
// server key for it; its error is that of the key or of the dial.
func (s *Socket) dialKeyed(d *dialer, ep string) (net.Conn, error) {
	if f := s.cfg.CurveServerKeyFor; f != nil {
		k, err := f(ep)
		if err != nil {
			if msg := err.Error(); msg != d.keyErr {
				d.keyErr = msg
				s.log.Warn("not connecting: no CURVE server key", "endpoint", ep, "err", err)
			}
			return nil, err
		}
		d.serverKey, d.keyErr = k, ""
	}
	return dial(d.ctx, d.ep)
}

func (s *Socket) dialLoop(d *dialer, ep string) {
	defer s.wg.Done()
	failures := 0
	for {
		c, err := s.dialKeyed(d, ep)
		if err == nil {
			d.mu.Lock()
			if d.ctx.Err() != nil {
				d.mu.Unlock()
				c.Close()
				return
			}
			d.conn = c
			d.mu.Unlock()
			established := s.serveConn(c, ep, true, d)
			d.mu.Lock()
			d.conn = nil
			d.mu.Unlock()
			if established {
				failures = 0
			} else {
				failures++
			}
		} else {
			if d.ctx.Err() != nil {
				return
			}
			failures++
			s.st.retries.Add(1)
			s.emit(Event{Type: EventConnectRetried, Endpoint: ep, Err: err})
		}
		if d.ctx.Err() != nil || s.closed.Load() {
			return
		}
		t := time.NewTimer(s.backoff(failures - 1))
		select {
		case <-t.C:
		case <-d.ctx.Done():
			t.Stop()
			return
		case <-s.closing:
			t.Stop()
			return
		}
	}
}
