package rpc

import (
	"errors"
	"slices"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/internal/localipc"
	"github.com/fastmq/fastmq/socket"
)

// Same-host calls. A server advertised in the mesh also listens on the
// unix socket twin of each tcp endpoint it advertises (internal/localipc),
// which is not advertised; a client looks for the twin of an instance's
// endpoints in its own directory and, when it is there, connects to it
// alone. A twin it cannot connect to, or whose handshake fails, sends it
// back to the tcp endpoints (fallBack).

// advertise binds the twins the configuration allows, then advertises
// the service with s.eps.
func (s *Server) advertise() error {
	s.listenLocal()
	return s.cfg.Discovery.Advertise(discovery.Service{Name: s.cfg.Service, Kind: socket.Router.String(), Endpoints: s.eps})
}

// listenLocal binds the server's socket to the unix socket twin of each
// advertised tcp endpoint, unless the configuration says otherwise. A
// twin that cannot be made is only logged: tcp serves everyone.
func (s *Server) listenLocal() {
	switch {
	case s.cfg.NoLocalIPC || !localipc.Supported():
		return
	case s.cfg.Socket.Authenticator != nil:
		s.log.Debug("rpc server: no unix socket twins: the socket has an Authenticator, which may refuse unix peers")
		return
	}
	dir := s.cfg.LocalIPCDir
	if dir == "" {
		dir = localipc.DefaultDir()
	}
	if err := localipc.Prepare(dir); err != nil {
		s.log.Warn("rpc server: no unix socket twins for clients on this host", "err", err)
		return
	}
	for _, ep := range s.eps {
		p, ok := localipc.Path(dir, ep)
		if !ok {
			continue
		}
		// Bind removes a twin left by a server that died; one that
		// listens (another server of this endpoint, in another network
		// namespace) fails it.
		if _, err := s.sock.Bind("ipc://" + p); err != nil {
			s.log.Warn("rpc server: no unix socket twin", "endpoint", ep, "err", err)
			continue
		}
		s.local = append(s.local, "ipc://"+p)
	}
}

// LocalEndpoints returns the unix socket twins of the advertised
// endpoints the server listens on (see ServerConfig.NoLocalIPC). The
// caller owns the slice.
func (s *Server) LocalEndpoints() []string { return slices.Clone(s.local) }

// localFor returns the twin of eps a new instance connects to alone, and
// the endpoint it stands for, if the configuration allows one and it is
// in the directory.
func (c *Client) localFor(eps []string) (twin, of string, ok bool) {
	if c.cfg.NoLocalIPC || c.cfg.Socket.Authenticator != nil {
		return "", "", false
	}
	twin, of, ok = localipc.Find(c.cfg.LocalIPCDir, eps)
	if !ok {
		return "", "", false
	}
	c.mu.Lock()
	_, failed := c.localFailed[twin]
	c.mu.Unlock()
	return twin, of, !failed
}

// keyForTwin makes a CurveServerKeyFor that gives twin the key of the
// endpoint of stands for (a node's keys are looked up by the endpoints
// it advertises, and twins are not advertised).
func keyForTwin(keyFor func(string) (socket.CurveKey, error), twin, of string) func(string) (socket.CurveKey, error) {
	return func(ep string) (socket.CurveKey, error) {
		if ep == twin {
			ep = of
		}
		return keyFor(ep)
	}
}

// maxLocalFailed bounds the twins a client remembers as failed.
const maxLocalFailed = 1024

// fallBack moves inst from its twin to its tcp endpoints, after ev said
// the twin failed: a connection refused or a missing file (a twin left
// by a server that died, or gone with it), a handshake that failed (a
// security setting that refuses unix peers, or a peer that is not
// ours). Requests wait in the DEALER while it has no connection, so none
// is lost. A twin whose handshake failed is not tried again by this
// client; one that was only missing or refused is looked for again by
// the instances made later (a server restarted at the same endpoint).
// Called by inst's eventLoop, with the events in their order.
func (c *Client) fallBack(inst *instance, ev socket.Event) {
	if inst.sock.Stats().Peers > 0 {
		// Connected since (the dialer retried before this event was
		// read): the twin works.
		return
	}
	c.mu.Lock()
	if inst.local == "" || ev.Endpoint != inst.local || c.closed {
		c.mu.Unlock()
		return
	}
	local := inst.local
	inst.local = ""
	if ev.Type == socket.EventHandshakeFailed {
		if len(c.localFailed) >= maxLocalFailed {
			clear(c.localFailed)
		}
		c.localFailed[local] = struct{}{}
	}
	inst.st.Endpoints = slices.Clone(inst.eps)
	c.mu.Unlock()
	c.log.Info("rpc client: unix socket twin failed; using tcp", "peer", inst.node, "endpoint", local, "event", ev.Type.String(), "err", ev.Err)
	if err := inst.sock.Disconnect(local); err != nil && !errors.Is(err, socket.ErrClosed) {
		c.log.Debug("disconnect twin", "endpoint", local, "err", err)
	}
	for _, ep := range inst.eps {
		if err := inst.sock.Connect(ep); err != nil && !errors.Is(err, socket.ErrClosed) {
			c.log.Warn("connect to instance", "peer", inst.node, "endpoint", ep, "err", err)
		}
	}
}
