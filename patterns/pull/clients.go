package pull

import (
	"sort"
	"sync"
	"time"
)

// ClientStats is one reader of one stream as the server sees it: who
// fetched (the consumer's and its node's name as a version 4 request
// tells them, the peer's address and authenticated principal), from
// where, and when last. Older consumers are listed with their address
// only.
type ClientStats struct {
	Stream   string `json:"stream"`
	Consumer string `json:"consumer,omitempty"`
	Node     string `json:"node,omitempty"`
	// Peer is the connection's remote address; Principal who its
	// handshake authenticated (a CURVE client's public key in Z85, a
	// PLAIN user), "" when none.
	Peer      string `json:"peer"`
	Principal string `json:"principal,omitempty"`
	// Position is the offset of its last fetch (the next record it asked
	// for); High the stream's next offset then (High-Position: its lag
	// as of that fetch).
	Position  uint64    `json:"position"`
	High      uint64    `json:"high"`
	LastFetch time.Time `json:"last_fetch"`
	Fetches   uint64    `json:"fetches"`
}

// Bounds of the server's readers table: at most maxClients entries; one
// not heard from for clientTTL is dropped.
const (
	maxClients = 4096
	clientTTL  = 10 * time.Minute
)

// clientKey names one reader of one stream: by its names when it tells
// them, else by its connection.
type clientKey struct {
	stream, consumer, node, conn string
}

// clientTable is the server's readers, updated on every fetch. Small
// shared map: a mutex.
type clientTable struct {
	mu sync.Mutex
	m  map[clientKey]*ClientStats
}

// sawFetch records a fetch of req by the peer at env, at high.
func (s *Server) sawFetch(env [][]byte, req Request, high uint64) {
	k := clientKey{stream: req.Stream, consumer: req.Consumer, node: req.Node}
	if req.Consumer == "" && req.Node == "" && len(env) > 0 {
		k.conn = string(env[0])
	}
	now := time.Now()
	t := &s.clients
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.m[k]
	if c == nil {
		if t.m == nil {
			t.m = make(map[clientKey]*ClientStats)
		}
		if len(t.m) >= maxClients {
			t.evictLocked(now)
		}
		c = &ClientStats{Stream: req.Stream, Consumer: req.Consumer, Node: req.Node}
		if len(env) > 0 {
			if cred, ok, err := s.sock.PeerCredentials(env[0]); err == nil && ok {
				c.Peer = cred.Address
				switch {
				case !cred.ClientKey.IsZero():
					c.Principal = cred.ClientKey.Z85()
				case cred.Username != "":
					c.Principal = cred.Username
				}
			}
		}
		t.m[k] = c
	}
	c.Position, c.High, c.LastFetch = req.Offset, high, now
	c.Fetches++
}

// evictLocked drops the readers not heard from for clientTTL, and if
// none is, the one heard from longest ago.
func (t *clientTable) evictLocked(now time.Time) {
	var oldest clientKey
	var oldestT time.Time
	for k, c := range t.m {
		if now.Sub(c.LastFetch) > clientTTL {
			delete(t.m, k)
			continue
		}
		if oldestT.IsZero() || c.LastFetch.Before(oldestT) {
			oldest, oldestT = k, c.LastFetch
		}
	}
	if len(t.m) >= maxClients {
		delete(t.m, oldest)
	}
}

// Clients returns the readers that fetched from this server in the last
// ten minutes, as nsqadmin lists a channel's clients: one entry per
// consumer, node and stream (per connection for consumers that tell no
// name), sorted by stream, node and consumer. The caller owns the slice.
func (s *Server) Clients() []ClientStats {
	now := time.Now()
	t := &s.clients
	t.mu.Lock()
	out := make([]ClientStats, 0, len(t.m))
	for k, c := range t.m {
		if now.Sub(c.LastFetch) > clientTTL {
			delete(t.m, k)
			continue
		}
		out = append(out, *c)
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Stream != b.Stream {
			return a.Stream < b.Stream
		}
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		if a.Consumer != b.Consumer {
			return a.Consumer < b.Consumer
		}
		return a.Peer < b.Peer
	})
	return out
}
