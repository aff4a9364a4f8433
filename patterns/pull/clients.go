package pull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/fastmq/fastmq/socket"
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

// replyReaders answers an OpReaders request: the readers of the streams
// the client may list (the ACL's list grants, which read and admin
// include; AllStreams: all of them).
func (s *Server) replyReaders(env [][]byte, req Request) {
	var out []ClientStats
	for _, c := range s.Clients() {
		if (req.Stream == AllStreams || c.Stream == req.Stream) && s.allowedQuiet(env, c.Stream) {
			out = append(out, c)
		}
	}
	if out == nil {
		out = []ClientStats{}
	}
	data, err := json.Marshal(out)
	if err != nil {
		s.reply(env, &Reply{Version: req.Version, Status: StatusInternal, ID: req.ID, Data: []byte(err.Error())})
		return
	}
	s.reply(env, &Reply{Version: req.Version, Status: StatusOK, ID: req.ID, Data: data})
}

// allowedQuiet is AllowedOp for ACLList without counting a refusal: a
// list leaves out what the client may not list, it refuses nothing.
func (s *Server) allowedQuiet(env [][]byte, stream string) bool {
	ix := s.acl.Load()
	if ix == nil {
		return true
	}
	if len(env) == 0 {
		return false
	}
	cred, ok, err := s.sock.PeerCredentials(env[0])
	return err == nil && ok && ix.allowsOp(cred, ACLList, stream)
}

// ErrOldServer reports a server that does not speak protocol version 4
// (it does not list its readers).
var ErrOldServer = errors.New("pull: the server speaks an older protocol")

// Readers asks the spool server at endpoint for its readers of stream
// (AllStreams: of every stream this client may list) over a DEALER socket
// of cfg. A server of an older version gives ErrOldServer. It blocks
// until the answer or ctx's end.
func Readers(ctx context.Context, endpoint, stream string, cfg socket.Config) ([]ClientStats, error) {
	cfg.Identity = nil
	sock, err := socket.New(socket.Dealer, cfg)
	if err != nil {
		return nil, err
	}
	defer sock.Close()
	if err := sock.Connect(endpoint); err != nil {
		return nil, err
	}
	req := Request{Version: 4, Op: OpReaders, ID: 1, Stream: stream, Epoch: NoEpoch}
	if err := sock.Send(ctx, socket.Msg{Frames: EncodeRequest(&req)}); err != nil {
		return nil, fmt.Errorf("pull: readers at %s: %w", endpoint, err)
	}
	for {
		m, err := sock.Recv(ctx)
		if err != nil {
			return nil, fmt.Errorf("pull: readers at %s: %w", endpoint, err)
		}
		rep, err := DecodeReply(m.Frames)
		if err != nil {
			return nil, fmt.Errorf("pull: readers at %s: %w", endpoint, err)
		}
		if rep.Status == StatusBadRequest && rep.Version < 4 {
			return nil, ErrOldServer
		}
		if rep.ID != req.ID {
			continue
		}
		if rep.Status != StatusOK {
			return nil, fmt.Errorf("pull: readers at %s: %s: %s", endpoint, rep.Status, message(rep.Data))
		}
		var out []ClientStats
		if err := json.Unmarshal(rep.Data, &out); err != nil {
			return nil, fmt.Errorf("pull: readers at %s: %w", endpoint, err)
		}
		return out, nil
	}
}
