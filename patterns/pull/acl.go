package pull

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/fastmq/fastmq/socket"
)

// ACL says which clients may read which streams of a Server (see
// ServerConfig.ACL): a client may read a stream when a rule names the
// client and one of the rule's patterns matches the stream. Everything
// else is refused with StatusForbidden, whether the stream exists or not.
// The client is who the server's socket authenticated: a CURVE client's
// public key, a PLAIN user name. An ACL is read-only once given to a
// Server.
//
// The ACL file format (ParseACL, LoadACL), version 1, is UTF-8 text, one
// rule per line:
//
//	fastmq-acl 1
//	# a comment: a line whose first non-blank character is '#'
//	allow <client> <stream pattern> [<stream pattern>...]
//
// The first line that is neither blank nor a comment must be the header
// "fastmq-acl 1". A client is "*" (every client, NULL ones included), a
// CURVE public key as 40 Z85 characters (as in a .pub file, optionally
// written "curve:KEY"), or "user:NAME" (a PLAIN user). Stream patterns
// are path.Match patterns: "*" every stream, "logs-*", "audit". A
// consumer group's dead-letter stream (STREAM.GROUP.dlq) is readable by
// exactly the clients that may read STREAM: a pattern that matches the
// dead-letter stream's own name neither grants nor refuses it.
type ACL struct {
	Rules []ACLRule
}

// ACLRule lets one client read the streams its patterns match.
type ACLRule struct {
	// Client is "*", a CURVE public key in Z85 ("curve:" optional) or
	// "user:NAME" for a PLAIN user (see ACL).
	Client string
	// Streams are path.Match patterns of stream names.
	Streams []string
}

// ACLVersion is the version of the ACL file format that ParseACL reads.
const ACLVersion = 1

// ErrBadACL reports an ACL that does not parse or holds a bad rule.
var ErrBadACL = errors.New("pull: bad acl")

// maxACLFile bounds an ACL file.
const maxACLFile = 1 << 20

// aclHeader is the first line of an ACL file.
const aclHeader = "fastmq-acl"

// LoadACL reads an ACL file (see ACL for the format).
func LoadACL(file string) (*ACL, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("pull: acl: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxACLFile+1))
	if err != nil {
		return nil, fmt.Errorf("pull: acl %s: %w", file, err)
	}
	a, err := ParseACL(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return a, nil
}

// ParseACL parses the text of an ACL file (see ACL for the format). An
// error names the line and what is wrong with it.
func ParseACL(data []byte) (*ACL, error) {
	if len(data) > maxACLFile {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBadACL, maxACLFile)
	}
	a := &ACL{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxACLFile)
	header := false
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		fields := strings.Fields(text)
		if !header {
			if len(fields) != 2 || fields[0] != aclHeader {
				return nil, fmt.Errorf("%w: line %d: want the header %q first, found %q", ErrBadACL, line, fmt.Sprintf("%s %d", aclHeader, ACLVersion), cut(text))
			}
			if fields[1] != fmt.Sprint(ACLVersion) {
				return nil, fmt.Errorf("%w: line %d: acl format version %q; this program reads version %d", ErrBadACL, line, cut(fields[1]), ACLVersion)
			}
			header = true
			continue
		}
		if fields[0] != "allow" {
			return nil, fmt.Errorf("%w: line %d: unknown keyword %q (want \"allow\")", ErrBadACL, line, cut(fields[0]))
		}
		if len(fields) < 3 {
			return nil, fmt.Errorf("%w: line %d: \"allow\" needs a client and at least one stream pattern", ErrBadACL, line)
		}
		r := ACLRule{Client: fields[1], Streams: fields[2:]}
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrBadACL, line, err)
		}
		a.Rules = append(a.Rules, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadACL, err)
	}
	if !header {
		return nil, fmt.Errorf("%w: no header %q", ErrBadACL, fmt.Sprintf("%s %d", aclHeader, ACLVersion))
	}
	return a, nil
}

// cut shortens a piece of a bad line for an error message.
func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// String returns the ACL in the file format (ParseACL reads it back).
func (a *ACL) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d\n", aclHeader, ACLVersion)
	for _, r := range a.Rules {
		fmt.Fprintf(&b, "allow %s %s\n", r.Client, strings.Join(r.Streams, " "))
	}
	return b.String()
}

// Validate checks every rule: a known kind of client, valid patterns.
func (a *ACL) Validate() error {
	for i, r := range a.Rules {
		if err := r.check(); err != nil {
			return fmt.Errorf("%w: rule %d: %v", ErrBadACL, i+1, err)
		}
	}
	return nil
}

// check validates one rule.
func (r ACLRule) check() error {
	if _, err := parseClient(r.Client); err != nil {
		return err
	}
	if len(r.Streams) == 0 {
		return fmt.Errorf("client %q has no stream pattern", cut(r.Client))
	}
	for _, p := range r.Streams {
		if p == "" || strings.ContainsAny(p, " \t\r\n") {
			return fmt.Errorf("empty or blank stream pattern %q", cut(p))
		}
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("stream pattern %q: %v", cut(p), err)
		}
	}
	return nil
}

// aclClient is a parsed ACLRule.Client.
type aclClient struct {
	any  bool
	key  socket.CurveKey
	user string
}

func parseClient(s string) (aclClient, error) {
	switch {
	case s == "*":
		return aclClient{any: true}, nil
	case strings.HasPrefix(s, "user:"):
		u := s[len("user:"):]
		if u == "" || len(u) > 255 || strings.ContainsAny(u, " \t\r\n") {
			return aclClient{}, fmt.Errorf("bad PLAIN user in %q", cut(s))
		}
		return aclClient{user: u}, nil
	}
	k, err := socket.ParseCurveKey(strings.TrimPrefix(s, "curve:"))
	if err != nil || k.IsZero() {
		return aclClient{}, fmt.Errorf("client %q is neither \"*\", \"user:NAME\" nor a CURVE public key (40 Z85 characters)", cut(s))
	}
	return aclClient{key: k}, nil
}

// aclIndex is an ACL compiled for lookups by client.
type aclIndex struct {
	any    []string                     // patterns every client may read
	byKey  map[socket.CurveKey][]string // by CURVE client key
	byUser map[string][]string          // by PLAIN user
}

// compileACL validates a and indexes it; nil for a nil ACL (no access
// control).
func compileACL(a *ACL) (*aclIndex, error) {
	if a == nil {
		return nil, nil
	}
	ix := &aclIndex{byKey: map[socket.CurveKey][]string{}, byUser: map[string][]string{}}
	for i, r := range a.Rules {
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("%w: rule %d: %v", ErrBadACL, i+1, err)
		}
		c, _ := parseClient(r.Client)
		switch {
		case c.any:
			ix.any = append(ix.any, r.Streams...)
		case c.user != "":
			ix.byUser[c.user] = append(ix.byUser[c.user], r.Streams...)
		default:
			ix.byKey[c.key] = append(ix.byKey[c.key], r.Streams...)
		}
	}
	return ix, nil
}

// allows reports whether the client with cred may read stream. A
// dead-letter stream (see deadLetterParents) is readable exactly by who
// may read its parent stream, whatever the patterns say of its own name:
// a grant of "logs.*" without "logs" does not reach "logs.g.dlq", the
// dead letters of "logs".
func (ix *aclIndex) allows(cred socket.PeerCredentials, stream string) bool {
	if parents := deadLetterParents(stream); len(parents) > 0 {
		for _, p := range parents {
			if !ix.allows(cred, p) {
				return false
			}
		}
		return true
	}
	if matchAny(ix.any, stream) {
		return true
	}
	switch cred.Mechanism {
	case "CURVE":
		return matchAny(ix.byKey[cred.ClientKey], stream)
	case "PLAIN":
		return matchAny(ix.byUser[cred.Username], stream)
	}
	return false
}

// deadLetterParents returns the streams whose dead-letter stream
// (STREAM.GROUP.dlq, group.DLQStream) stream may be: every P such that
// stream is P + "." + G + ".dlq" for a non-empty P and G (a group name
// may hold dots, so "a.b.c.dlq" is the dead letters of "a", group "b.c",
// or of "a.b", group "c"). None for other names.
func deadLetterParents(stream string) []string {
	base, ok := strings.CutSuffix(stream, ".dlq")
	if !ok {
		return nil
	}
	var parents []string
	for i := 1; i < len(base)-1; i++ {
		if base[i] == '.' && base[i+1] != '.' && base[i+1] != '-' {
			parents = append(parents, base[:i])
		}
	}
	return parents
}

func matchAny(patterns []string, stream string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, stream); ok {
			return true
		}
	}
	return false
}

// Allows reports whether the ACL lets the client with cred read stream.
func (a *ACL) Allows(cred socket.PeerCredentials, stream string) bool {
	ix, err := compileACL(a)
	if err != nil {
		return false
	}
	return ix == nil || ix.allows(cred, stream)
}

// SetACL replaces the server's ACL (nil: no access control) for the
// requests received from now on; fetches parked before keep waiting. An
// invalid ACL is refused and the old one kept. Safe for concurrent use.
func (s *Server) SetACL(a *ACL) error {
	ix, err := compileACL(a)
	if err != nil {
		return err
	}
	s.acl.Store(ix)
	return nil
}

// Allowed reports whether the peer of the ROUTER envelope env may read
// stream under the server's ACL (always, without one), by the credentials
// its handshake established; a peer no longer connected may not. A
// refusal is counted in ServerStats.Forbidden. It is for Extensions, which
// answer a refusal in their own protocol, the same whether the stream
// exists or not.
func (s *Server) Allowed(env [][]byte, stream string) bool {
	ix := s.acl.Load()
	if ix == nil {
		return true
	}
	if len(env) > 0 {
		cred, ok, err := s.sock.PeerCredentials(env[0])
		if err == nil && ok && ix.allows(cred, stream) {
			return true
		}
	}
	s.forbidden.Add(1)
	return false
}

// ForbiddenMessage is the message of every StatusForbidden reply for
// stream: it says nothing of whether the stream exists.
func ForbiddenMessage(stream string) string {
	return fmt.Sprintf("this client may not read stream %q", stream)
}

// replyForbidden answers a request the ACL refuses: StatusForbidden in
// version 3, and StatusBadRequest with the same message to older
// consumers, which do not know StatusForbidden (they stop with a protocol
// error that carries it).
func (s *Server) replyForbidden(env [][]byte, req Request) {
	st, msg := StatusForbidden, ForbiddenMessage(req.Stream)
	if req.Version < 3 {
		st, msg = StatusBadRequest, "forbidden: "+msg
	}
	s.reply(env, &Reply{Version: req.Version, Status: st, ID: req.ID, Data: []byte(msg)})
}
