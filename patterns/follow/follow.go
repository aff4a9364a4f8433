// Package follow keeps a socket connected to every discovered instance of a
// service: it connects to instances as discovery reports them, reconnects
// when an instance's endpoints change and disconnects from instances that
// fail, leave or withdraw the service.
//
// A Follower is how a Node's Dial works, and it is usable without a Node:
//
//	f, err := follow.New(follow.Config{Socket: s, Service: "orders", Discovery: members})
//	go f.Run(ctx)
//	...
//	f.Close()
//	s.Close()
//
// The socket is the caller's: the Follower only connects and disconnects
// it, and never closes it.
package follow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/socket"
)

// ErrClosed is returned by Run after Close.
var ErrClosed = errors.New("follow: closed")

// Watcher reports the instances of a service as they come and go.
// *discovery.Membership and discoverytest's *Node implement it.
type Watcher interface {
	Watch(ctx context.Context, service string) (<-chan discovery.Event, error)
}

// Config configures a Follower.
type Config struct {
	// Socket is connected to the discovered instances. Required. It stays
	// the caller's: the Follower never closes it.
	Socket *socket.Socket
	// Service to follow. Required.
	Service string
	// Discovery reports the instances of Service. Required.
	Discovery Watcher
	// Logger receives the follower's logs; nil discards them.
	Logger *slog.Logger
}

// Follower connects a socket to the instances of a service. Run does the
// work; Close stops it.
//
// A Follower is safe for concurrent use. Run blocks until its context ends,
// Close is called or the watch ends; it may run once. Close is idempotent
// and returns after Run has returned.
type Follower struct {
	cfg Config
	log *slog.Logger

	closing chan struct{} // closed by Close

	mu        sync.Mutex
	closed    bool
	ran       bool
	wg        sync.WaitGroup      // Run
	connected map[string][]string // node -> endpoints the socket is connected to
}

// New checks cfg and returns a Follower; nothing happens until Run.
func New(cfg Config) (*Follower, error) {
	switch {
	case cfg.Socket == nil:
		return nil, errors.New("follow: Socket is required")
	case cfg.Service == "":
		return nil, errors.New("follow: Service is required")
	case cfg.Discovery == nil:
		return nil, errors.New("follow: Discovery is required")
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &Follower{
		cfg:       cfg,
		log:       lg.With("component", "follow", "service", cfg.Service),
		closing:   make(chan struct{}),
		connected: make(map[string][]string),
	}, nil
}

// Run watches the service and keeps the socket connected to its instances
// until ctx ends or Close is called. It always returns a non-nil error:
// ctx.Err() when ctx ended, ErrClosed after Close, or why the watch failed
// or ended (discovery closed). Endpoints it connected stay connected when
// Run returns.
func (f *Follower) Run(ctx context.Context) error {
	f.mu.Lock()
	switch {
	case f.closed:
		f.mu.Unlock()
		return ErrClosed
	case f.ran:
		f.mu.Unlock()
		return errors.New("follow: Run called twice")
	}
	f.ran = true
	f.wg.Add(1)
	f.mu.Unlock()
	defer f.wg.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := f.cfg.Discovery.Watch(ctx, f.cfg.Service)
	if err != nil {
		return fmt.Errorf("follow: watch %q: %w", f.cfg.Service, err)
	}
	for {
		select {
		case <-f.closing:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-events:
			if !ok {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("follow: watch of %q ended", f.cfg.Service)
			}
			f.apply(ev)
		}
	}
}

// apply brings the socket's connections to ev's node in line with ev.
func (f *Follower) apply(ev discovery.Event) {
	node := ev.Instance.Node
	f.mu.Lock()
	old := f.connected[node]
	f.mu.Unlock()
	for _, ep := range old {
		if ev.Type == discovery.Removed || !slices.Contains(ev.Instance.Service.Endpoints, ep) {
			if err := f.cfg.Socket.Disconnect(ep); err != nil && !errors.Is(err, socket.ErrClosed) {
				f.log.Debug("disconnect", "endpoint", ep, "err", err)
			}
		}
	}
	var now []string
	if ev.Type != discovery.Removed {
		for _, ep := range ev.Instance.Service.Endpoints {
			if !slices.Contains(old, ep) {
				if err := f.cfg.Socket.Connect(ep); err != nil {
					f.log.Warn("connect to discovered endpoint", "peer", node, "endpoint", ep, "err", err)
					continue
				}
			}
			now = append(now, ep)
		}
	}
	f.mu.Lock()
	if len(now) == 0 {
		delete(f.connected, node)
	} else {
		f.connected[node] = now
	}
	f.mu.Unlock()
}

// Endpoints returns the endpoints the socket is connected to through the
// Follower, sorted. The caller owns the slice.
func (f *Follower) Endpoints() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var eps []string
	for _, list := range f.connected {
		eps = append(eps, list...)
	}
	sort.Strings(eps)
	return eps
}

// Close stops Run and returns after it has returned. It leaves the socket
// and its connections alone. Close is idempotent.
func (f *Follower) Close() error {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.closing)
	}
	f.mu.Unlock()
	f.wg.Wait()
	return nil
}
