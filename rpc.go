package fastmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/internal/netaddr"
	"github.com/fastmq/fastmq/patterns/rpc"
	"github.com/fastmq/fastmq/socket"
)

// HandleOptions tune Node.Handle. The zero value serves with
// patterns/rpc's defaults on the node's host, port 0.
type HandleOptions struct {
	// Endpoint the ROUTER socket binds. Default: the spool server's host,
	// port 0 (every interface when the spool binds every interface; the
	// advertisement then carries the spool's advertised host).
	Endpoint string
	// Advertise is the endpoint advertised, if not the bound one.
	Advertise string
	// Server tunes the server: Concurrency, QueueSize, CacheWindow,
	// CacheSize, DrainGrace, NoLocalIPC, LocalIPCDir, Socket, Logger (the
	// node's by default). Handle sets its Service, Handler, Listener,
	// Endpoints, AdvertiseEndpoints, Discovery and Node fields itself, and
	// refuses, with an error naming the field, a Server that sets any of
	// them (Endpoint and Advertise above say where to bind).
	Server rpc.ServerConfig
}

// Handle serves handler as service: a patterns/rpc Server on a ROUTER
// socket, advertised in the mesh, which any node reaches with Call (and a
// plain ZeroMQ REQ socket with Dial(socket.Req, service, …) or a libzmq
// REQ connected to its endpoint). Call the Server's Shutdown to drain it
// (it withdraws the advertisement first); Node.Shutdown drains every
// server the node handles before it leaves the mesh, and Close stops them
// without draining.
func (n *Node) Handle(service string, handler rpc.Handler, opts HandleOptions) (*rpc.Server, error) {
	sc := opts.Server
	if err := nodeOwned("HandleOptions.Server", owned{"Service", sc.Service}, owned{"Handler", sc.Handler}, owned{"Listener", sc.Listener},
		owned{"Endpoints", sc.Endpoints}, owned{"AdvertiseEndpoints", sc.AdvertiseEndpoints}, owned{"Discovery", sc.Discovery},
		owned{"Node", sc.Node}); err != nil {
		return nil, err
	}
	ep, adv, err := n.rpcEndpoints(opts.Endpoint, opts.Advertise)
	if err != nil {
		return nil, err
	}
	sock := n.sec.ServerSocket(opts.Server.Socket)
	if sock.Logger == nil {
		sock.Logger = n.cfg.Logger
	}
	s, err := socket.New(socket.Router, sock)
	if err != nil {
		return nil, err
	}
	bound, err := s.Bind(ep)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("fastmq: handle %q: %w", service, err)
	}
	if adv == "" {
		adv = bound
		if host := netaddr.HostOf(strings.TrimPrefix(bound, "tcp://")); strings.HasPrefix(bound, "tcp://") && discovery.IsWildcard(host) {
			_, port, _ := net.SplitHostPort(strings.TrimPrefix(bound, "tcp://"))
			adv = "tcp://" + net.JoinHostPort(netaddr.HostOf(strings.TrimPrefix(n.spoolEP, "tcp://")), port)
		}
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		s.Close()
		return nil, ErrClosed
	}
	n.sockets[s] = nil
	n.mu.Unlock()
	cfg := opts.Server
	cfg.Service, cfg.Handler, cfg.Listener = service, handler, s
	cfg.AdvertiseEndpoints = []string{adv}
	cfg.Discovery, cfg.Node = n.members, n.cfg.Name
	cfg.NoLocalIPC = cfg.NoLocalIPC || n.cfg.NoLocalIPC
	if cfg.LocalIPCDir == "" {
		cfg.LocalIPCDir = n.cfg.LocalIPCDir
	}
	if cfg.Logger == nil {
		cfg.Logger = n.cfg.Logger
	}
	srv, err := rpc.NewServer(cfg)
	if err != nil {
		n.mu.Lock()
		delete(n.sockets, s)
		n.mu.Unlock()
		s.Close()
		return nil, fmt.Errorf("fastmq: handle %q: %w", service, err)
	}
	nc := n.registry()
	nc.mu.Lock()
	nc.servers[srv] = service
	nc.mu.Unlock()
	return srv, nil
}

// rpcEndpoints returns the endpoint Handle binds and the one it
// advertises ("" for the bound one).
func (n *Node) rpcEndpoints(ep, adv string) (string, string, error) {
	if ep != "" {
		return ep, adv, nil
	}
	spool := n.cfg.SpoolEndpoints[0]
	host := "127.0.0.1"
	if rest, ok := strings.CutPrefix(spool, "tcp://"); ok {
		if h := netaddr.HostOf(rest); h != "" {
			host = h
		}
	}
	if host == "*" {
		host = "0.0.0.0"
	}
	return "tcp://" + net.JoinHostPort(host, "0"), adv, nil
}

// Call sends req to an instance of service and returns its reply, through
// a patterns/rpc Client the node keeps per service (made on first use):
// least-outstanding routing over every discovered instance, retries on
// another instance, failover when an instance dies (see rpc.Client.Call
// for which calls are retried). With no instance, Call fails at once with
// an error matching rpc.ErrNoInstance, unless opts.WaitForInstance. The
// reply belongs to the caller.
func (n *Node) Call(ctx context.Context, service string, req []byte, opts rpc.CallOptions) ([]byte, error) {
	c, err := n.rpcClient(service)
	if err != nil {
		return nil, err
	}
	return c.Call(ctx, req, opts)
}

// RPCClient returns the client Call uses for service, for its statistics
// or WaitForInstances. The node owns it.
func (n *Node) RPCClient(service string) (*rpc.Client, error) { return n.rpcClient(service) }

// nodeClients are a node's rpc clients by service and its servers, owned
// by the node: Shutdown drains the servers, Close closes them all.
type nodeClients struct {
	mu      sync.Mutex
	clients map[string]*rpc.Client
	servers map[*rpc.Server]string // by service, for RPCStatus
}

func newNodeClients() *nodeClients {
	return &nodeClients{clients: make(map[string]*rpc.Client), servers: make(map[*rpc.Server]string)}
}

// registry returns the node's clients and servers.
func (n *Node) registry() *nodeClients { return n.rpc }

// shutdownRPC drains the node's RPC servers (each withdraws its
// advertisement, finishes what it accepted, then closes) within ctx.
func (n *Node) shutdownRPC(ctx context.Context) error {
	n.rpc.mu.Lock()
	var srvs []*rpc.Server
	for s := range n.rpc.servers {
		srvs = append(srvs, s)
	}
	n.rpc.mu.Unlock()
	var errs []error
	for _, s := range srvs {
		if err := s.Shutdown(ctx); err != nil && !errors.Is(err, rpc.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// closeRPC closes the node's RPC clients and servers at once.
func (n *Node) closeRPC() {
	n.rpc.mu.Lock()
	clients, servers := n.rpc.clients, n.rpc.servers
	n.rpc.clients, n.rpc.servers = map[string]*rpc.Client{}, map[*rpc.Server]string{}
	n.rpc.mu.Unlock()
	for _, c := range clients {
		c.Close()
	}
	for s := range servers {
		s.Close()
	}
}

// RPCStatus is what a node's RPC clients and servers have counted.
type RPCStatus struct {
	// Clients are Call's clients by service, with per-instance counters.
	Clients map[string]rpc.ClientStats `json:"clients"`
	// Servers are Handle's servers by service (several Handle calls for
	// one service add up).
	Servers map[string]rpc.ServerStats `json:"servers"`
}

// RPCStatus returns the counters of the node's RPC clients (per service
// and instance: calls, errors, retries, timeouts, ejections, latency
// histogram) and servers. The caller owns the maps.
func (n *Node) RPCStatus() RPCStatus {
	st := RPCStatus{Clients: map[string]rpc.ClientStats{}, Servers: map[string]rpc.ServerStats{}}
	nc := n.rpc
	nc.mu.Lock()
	defer nc.mu.Unlock()
	for svc, c := range nc.clients {
		st.Clients[svc] = c.Stats()
	}
	for srv, svc := range nc.servers {
		a, b := st.Servers[svc], srv.Stats()
		a.Requests += b.Requests
		a.Handled += b.Handled
		a.Errors += b.Errors
		a.CacheHits += b.CacheHits
		a.Expired += b.Expired
		a.Overloaded += b.Overloaded
		a.Unavailable += b.Unavailable
		a.BadRequests += b.BadRequests
		a.SendsFailed += b.SendsFailed
		a.InFlight += b.InFlight
		a.Cached += b.Cached
		st.Servers[svc] = a
	}
	return st
}

// rpcClient returns the node's client for service, making it on first use.
func (n *Node) rpcClient(service string) (*rpc.Client, error) {
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	nc := n.registry()
	nc.mu.Lock()
	defer nc.mu.Unlock()
	if c, ok := nc.clients[service]; ok {
		return c, nil
	}
	sc := n.sec.ClientSocket(n.cfg.Socket)
	if sc.Logger == nil {
		sc.Logger = n.cfg.Logger
	}
	c, err := rpc.NewClient(rpc.ClientConfig{Service: service, Discovery: n.members, Socket: sc, Logger: n.cfg.Logger,
		NoLocalIPC: n.cfg.NoLocalIPC, LocalIPCDir: n.cfg.LocalIPCDir})
	if err != nil {
		if errors.Is(err, rpc.ErrClosed) {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("fastmq: call %q: %w", service, err)
	}
	nc.clients[service] = c
	return c, nil
}
