package fastmq

import (
	"context"
	"errors"
	"fmt"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/patterns/follow"
	"github.com/fastmq/fastmq/socket"
)

// Serve makes a socket of kind, binds it to endpoint and advertises it in
// the mesh as service. A node with a CURVE key (Config.CurveKey) makes it
// a CURVE server with that key, for the clients the node trusts, unless
// cfg sets PLAIN or CURVE itself. The node closes the socket on Close.
func (n *Node) Serve(kind socket.Kind, service, endpoint string, cfg socket.Config) (*socket.Socket, error) {
	cfg = n.sec.ServerSocket(cfg)
	if cfg.Logger == nil {
		cfg.Logger = n.cfg.Logger
	}
	s, err := socket.New(kind, cfg)
	if err != nil {
		return nil, err
	}
	bound, err := s.Bind(endpoint)
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := n.members.Advertise(discovery.Service{Name: service, Kind: kind.String(), Endpoints: []string{bound}}); err != nil {
		s.Close()
		return nil, fmt.Errorf("fastmq: advertise %q: %w", service, err)
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		s.Close()
		return nil, ErrClosed
	}
	n.sockets[s] = nil
	n.mu.Unlock()
	return s, nil
}

// Dial makes a socket of kind connected to every discovered instance of
// service. It follows the gossip: it connects to instances as they appear
// and disconnects from those that fail or leave, through a follow.Follower
// (patterns/follow). A node with a CURVE key connects to each instance as
// a CURVE client with the key the instance's node advertises (see
// Config.CurveKey), unless cfg sets PLAIN or CURVE itself. The node
// closes the socket on Close.
func (n *Node) Dial(kind socket.Kind, service string, cfg socket.Config) (*socket.Socket, error) {
	cfg = n.sec.ClientSocket(cfg)
	if cfg.Logger == nil {
		cfg.Logger = n.cfg.Logger
	}
	s, err := socket.New(kind, cfg)
	if err != nil {
		return nil, err
	}
	f, err := follow.New(follow.Config{Socket: s, Service: service, Discovery: n.members, Logger: n.cfg.Logger})
	if err != nil {
		s.Close()
		return nil, err
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		s.Close()
		return nil, ErrClosed
	}
	n.sockets[s] = f
	n.wg.Add(1)
	n.mu.Unlock()
	go func() {
		defer n.wg.Done()
		if err := f.Run(context.Background()); !errors.Is(err, follow.ErrClosed) {
			n.log.Error("following a service stopped", "service", service, "err", err)
		}
	}()
	return s, nil
}
