package socket

import (
	"errors"
	"fmt"
	"net"
	"time"
)

type listener struct {
	l        net.Listener
	ep       string
	resolved string
	done     chan struct{}
}

// Bind listens on endpoint and returns the resolved endpoint (with the
// actual port for tcp://host:0). Supported forms: tcp://host:port
// (host may be * for all interfaces, port 0 or * for any), ipc://path (a
// stale socket file nobody listens on is removed) and inproc://name.
func (s *Socket) Bind(ep string) (string, error) {
	e, err := parseEndpoint(ep, true)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return "", ErrClosed
	}
	l, resolved, err := listen(e)
	if err != nil {
		return "", err
	}
	ln := &listener{l: l, ep: ep, resolved: resolved, done: make(chan struct{})}
	s.listeners[resolved] = ln
	s.wg.Add(1)
	go s.acceptLoop(ln)
	s.log.Info("listening", "endpoint", resolved)
	s.emit(Event{Type: EventListening, Endpoint: resolved})
	return resolved, nil
}

// Unbind stops listening on an endpoint Bind returned, or on every
// listener bound with the endpoint given to Bind. Established connections
// stay up.
func (s *Socket) Unbind(ep string) error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return ErrClosed
	}
	var lns []*listener
	for k, ln := range s.listeners {
		if ln.ep == ep || ln.resolved == ep {
			lns = append(lns, ln)
			delete(s.listeners, k)
		}
	}
	s.mu.Unlock()
	if len(lns) == 0 {
		return fmt.Errorf("%w: %s is not bound", ErrBadEndpoint, ep)
	}
	for _, ln := range lns {
		ln.l.Close()
		<-ln.done
	}
	return nil
}

func (s *Socket) acceptLoop(ln *listener) {
	defer s.wg.Done()
	defer close(ln.done)
	var delay time.Duration
	for {
		c, err := ln.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.closed.Load() {
				return
			}
			// Out of file descriptors and the like: back off briefly.
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else if delay < time.Second {
				delay *= 2
			}
			s.log.Warn("accept failed", "endpoint", ln.resolved, "err", err)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-s.closing:
				t.Stop()
				return
			}
			continue
		}
		delay = 0
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(c, ln.resolved, false, nil)
		}()
	}
}
