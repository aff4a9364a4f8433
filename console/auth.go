package console

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
)

// Tokens maps HTTP bearer tokens to the ACL clients they authenticate
// as, so that the console, /status and /metrics obey the spool server's
// ACL (pull.ACL) with the same principals: a token stands for a PLAIN
// user ("user:NAME") or a CURVE public key ("curve:KEY" or the 40 Z85
// characters). A Tokens is read-only and safe for concurrent use.
//
// The file format (ParseTokens, LoadTokens) is one token a line:
//
//	# a comment
//	TOKEN CLIENT
//
// A token is at least 16 characters without blanks (fastmq keygen's
// secret keys, or 32 random bytes in hex, say).
type Tokens struct {
	byHash map[[sha256.Size]byte]socket.PeerCredentials
}

// ErrBadTokens reports a token file that does not parse.
var ErrBadTokens = errors.New("console: bad tokens")

// minToken is the shortest token ParseTokens takes.
const minToken = 16

// ParseTokens parses the text of a token file (see Tokens).
func ParseTokens(data []byte) (*Tokens, error) {
	t := &Tokens{byHash: map[[sha256.Size]byte]socket.PeerCredentials{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		f := strings.Fields(s)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: line %d: want TOKEN CLIENT", ErrBadTokens, line)
		}
		if len(f[0]) < minToken {
			return nil, fmt.Errorf("%w: line %d: a token of %d characters, want at least %d", ErrBadTokens, line, len(f[0]), minToken)
		}
		cred, err := credentialsOf(f[1])
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrBadTokens, line, err)
		}
		t.byHash[sha256.Sum256([]byte(f[0]))] = cred
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadTokens, err)
	}
	return t, nil
}

// LoadTokens reads a token file (see Tokens).
func LoadTokens(file string) (*Tokens, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("console: tokens: %w", err)
	}
	return ParseTokens(b)
}

// credentialsOf is the client an ACL rule names, as the spool server's
// socket would have authenticated it.
func credentialsOf(client string) (socket.PeerCredentials, error) {
	if u, ok := strings.CutPrefix(client, "user:"); ok {
		if u == "" || len(u) > 255 {
			return socket.PeerCredentials{}, fmt.Errorf("bad user %q", client)
		}
		return socket.PeerCredentials{Mechanism: "PLAIN", Username: u}, nil
	}
	k, err := socket.ParseCurveKey(strings.TrimPrefix(client, "curve:"))
	if err != nil || k.IsZero() {
		return socket.PeerCredentials{}, fmt.Errorf("client %q is neither user:NAME nor a CURVE public key", client)
	}
	return socket.PeerCredentials{Mechanism: "CURVE", ClientKey: k}, nil
}

// lookup returns the client of token.
func (t *Tokens) lookup(token string) (socket.PeerCredentials, bool) {
	if t == nil {
		return socket.PeerCredentials{}, false
	}
	c, ok := t.byHash[sha256.Sum256([]byte(token))]
	return c, ok
}

// access is what one HTTP caller may see: every stream (all), or those
// the node's ACL lets its client read.
type access struct {
	all  bool
	cred socket.PeerCredentials
	srv  *pull.Server
}

// may reports whether the caller may read stream (peek at its records).
func (a access) may(stream string) bool {
	return a.all || a.srv.AllowedCredentials(a.cred, pull.ACLRead, stream)
}

// mayList reports whether the caller may see stream's state (offsets,
// groups, consumers, readers): the ACL's list grant, which read and admin
// include.
func (a access) mayList(stream string) bool {
	return a.all || a.srv.AllowedCredentials(a.cred, pull.ACLList, stream)
}

// accessOf authenticates r. A node without an ACL and without tokens
// lets every caller see everything (as its spool port does). Otherwise a
// caller is the client of its bearer token; without one, a caller on
// loopback is an anonymous (NULL) client, whom only the ACL's "*" rules
// grant anything, and a caller from beyond loopback is refused (401).
func (c *Console) accessOf(r *http.Request) (access, error) {
	srv := c.cfg.Node.Server()
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		cred, known := c.cfg.Tokens.lookup(strings.TrimSpace(tok))
		if !ok || !known {
			return access{}, errors.New("console: unknown token")
		}
		return access{cred: cred, srv: srv}, nil
	}
	if !srv.HasACL() && c.cfg.Tokens == nil {
		return access{all: true}, nil
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsLoopback() {
		return access{cred: socket.PeerCredentials{Mechanism: "NULL"}, srv: srv}, nil
	}
	return access{}, errors.New("console: authentication required (Authorization: Bearer TOKEN)")
}

// authed wraps h: a caller that fails authentication gets 401; h gets
// the caller's access.
func (c *Console) authed(h func(w http.ResponseWriter, r *http.Request, a access)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := c.accessOf(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="fastmq"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": err.Error()})
			return
		}
		h(w, r, a)
	})
}

// filterStatus removes from st what the caller may not list (see mayList): streams,
// groups, consumers, readers and the stream names of members'
// advertisements. st's slices are replaced, not modified.
func filterStatus(st *fastmq.Status, a access) {
	if a.all {
		return
	}
	st.Streams = keep(st.Streams, func(s fastmq.StreamStatus) bool { return a.mayList(s.Name) })
	st.Groups = keep(st.Groups, func(g group.GroupStats) bool { return a.mayList(g.Stream) })
	st.GroupsBehind = keep(st.GroupsBehind, func(g fastmq.GroupBehind) bool { return a.mayList(g.Stream) })
	st.Consumers = keep(st.Consumers, func(c fastmq.ConsumerStatus) bool { return a.mayList(c.Stream) })
	st.Readers = keep(st.Readers, func(r pull.ClientStats) bool { return a.mayList(r.Stream) })
	ms := make([]fastmq.MemberStatus, len(st.Members))
	for i, m := range st.Members {
		m.Streams = keep(m.Streams, a.mayList)
		ms[i] = m
	}
	st.Members = ms
}

// keep returns the elements of s that ok keeps, in a new slice.
func keep[T any](s []T, ok func(T) bool) []T {
	var out []T
	for _, v := range s {
		if ok(v) {
			out = append(out, v)
		}
	}
	return out
}

// filterView is v with what the caller may not read removed (see
// filterStatus; rates keyed by a stream it may not read too).
func filterView(v View, a access) View {
	if a.all {
		return v
	}
	ms := make([]MeshMember, len(v.Mesh.Members))
	for i, m := range v.Mesh.Members {
		m.Streams = keep(m.Streams, a.mayList)
		if m.State != nil {
			st := *m.State
			filterStatus(&st, a)
			m.State = &st
		}
		ms[i] = m
	}
	v.Mesh.Members = ms
	byStream := func(rates map[string]float64, field int) map[string]float64 {
		out := make(map[string]float64, len(rates))
		for k, r := range rates {
			if f := strings.Split(k, "/"); len(f) > field && a.mayList(f[field]) {
				out[k] = r
			}
		}
		return out
	}
	v.AppendRate = byStream(v.AppendRate, 1)
	v.DeliverRate = byStream(v.DeliverRate, 2)
	v.AckRate = byStream(v.AckRate, 2)
	v.GroupDeliverRate = byStream(v.GroupDeliverRate, 1)
	v.GroupAckRate = byStream(v.GroupAckRate, 1)
	return v
}

// bearer adds a bearer token to each request of base.
type bearer struct {
	token string
	base  http.RoundTripper
}

// RoundTrip sends req with the token.
func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(req)
}

// TokenClient returns a client (over base, nil: http.DefaultTransport)
// that presents token to the nodes it asks (fastmq status --token-file,
// a console's Config.PeerToken).
func TokenClient(base http.RoundTripper, token string) *http.Client {
	if base == nil {
		base = http.DefaultTransport
	}
	return &http.Client{Transport: bearer{token: token, base: base}}
}
