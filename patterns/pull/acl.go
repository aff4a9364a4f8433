package pull

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/fastmq/fastmq/socket"
)

// ACL says which clients may do what with which streams of a Server (see
// ServerConfig.ACL): a client may do an operation on a stream when a rule
// grants it that operation (see ACLOp) and one of the rule's patterns
// matches the stream. Everything else is refused with StatusForbidden,
// whether the stream exists or not. The client is who the server's socket
// authenticated: a CURVE client's public key, a PLAIN user name. An ACL is
// read-only once given to a Server.
//
// The ACL file format (ParseACL, LoadACL), version 2, is UTF-8 text, one
// rule per line:
//
//	fastmq-acl 2
//	# a comment: a line whose first non-blank character is '#'
//	allow read <client> <stream pattern> [<stream pattern>...]
//	allow list <client> <stream pattern> [<stream pattern>...]
//	allow admin <client> <stream pattern> [<stream pattern>...]
//	limit members <n> <client> <stream pattern> [<stream pattern>...]
//
// The first line that is neither blank nor a comment must be the header,
// "fastmq-acl 2" (or "fastmq-acl 1": a version 1 file has no operation
// in its rules, "allow <client> <patterns>", and each of them is a read
// grant; a version 2 rule without an operation is one too). A client is
// "*" (every client, NULL ones included), a
// CURVE public key as 40 Z85 characters (as in a .pub file, optionally
// written "curve:KEY"), or "user:NAME" (a PLAIN user). Stream patterns
// are path.Match patterns: "*" every stream, "logs-*", "audit". A
// consumer group's dead-letter stream (STREAM.GROUP.dlq) is readable by
// exactly the clients that may read STREAM: a pattern that matches the
// dead-letter stream's own name neither grants nor refuses it.
//
// A "limit members" line (version 2) grants nothing: it bounds the
// members the client may have in one consumer group of a stream its
// patterns match, on each publisher (see ACLLimit and MemberLimit), so
// that one key cannot take all of a group's member slots. A limit of "*"
// bounds every client on its own (the NULL clients together), and a
// client's own limits, when it has some for the stream, replace those of
// "*".
type ACL struct {
	Rules []ACLRule
	// Limits are the file's "limit members" lines.
	Limits []ACLLimit
}

// ACLLimit bounds the members one client may have in one consumer group
// of each stream its patterns match (a "limit members" line of the ACL
// file).
type ACLLimit struct {
	// Members is the most members per group; at least 1.
	Members int
	// Client is "*", a CURVE public key or "user:NAME", as in ACLRule.
	Client string
	// Streams are path.Match patterns of stream names.
	Streams []string
}

// ACLOp is what an ACL rule grants on the streams it matches.
type ACLOp uint8

// ACL operations. A grant of read or admin includes list.
const (
	// ACLRead reads the stream's records: fetches, a consumer group's
	// member operations (fetch, ack, nak...), its dead letters. It is the
	// zero value: the only grant of a version 1 rule.
	ACLRead ACLOp = iota
	// ACLList lists the stream's consumer groups and their state (fastmq
	// group ls, group info) without reading records. Listing every
	// stream's groups at once needs a pattern that matches "*" itself.
	ACLList
	// ACLAdmin changes a group's state: seek its cursor, replay its dead
	// letters.
	ACLAdmin
)

// String returns the keyword of op in the ACL file format.
func (op ACLOp) String() string {
	switch op {
	case ACLRead:
		return "read"
	case ACLList:
		return "list"
	case ACLAdmin:
		return "admin"
	}
	return fmt.Sprintf("ACLOp(%d)", uint8(op))
}

// parseACLOp returns the operation keyword s names.
func parseACLOp(s string) (ACLOp, bool) {
	for op := ACLRead; op <= ACLAdmin; op++ {
		if s == op.String() {
			return op, true
		}
	}
	return 0, false
}

// ACLRule lets one client do one operation on the streams its patterns
// match.
type ACLRule struct {
	// Op is what the rule grants; the zero value is ACLRead.
	Op ACLOp
	// Client is "*", a CURVE public key in Z85 ("curve:" optional) or
	// "user:NAME" for a PLAIN user (see ACL).
	Client string
	// Streams are path.Match patterns of stream names.
	Streams []string
}

// ACLVersion is the version of the ACL file format that ParseACL reads
// (with version 1) and String writes (version 1 when every rule is a read
// grant and there is no limit, which older programs read too).
const ACLVersion = 2

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
	version := 0 // of the header, once read
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		fields := strings.Fields(text)
		if version == 0 {
			if len(fields) != 2 || fields[0] != aclHeader {
				return nil, fmt.Errorf("%w: line %d: want the header %q or %q first, found %q", ErrBadACL, line, aclHeader+" 1", aclHeader+" 2", cut(text))
			}
			switch fields[1] {
			case "1", "2":
				version = int(fields[1][0] - '0')
			default:
				return nil, fmt.Errorf("%w: line %d: acl format version %q; this program reads versions 1 and %d", ErrBadACL, line, cut(fields[1]), ACLVersion)
			}
			continue
		}
		if fields[0] == "limit" {
			l, err := parseLimit(fields, version)
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: %v", ErrBadACL, line, err)
			}
			a.Limits = append(a.Limits, l)
			continue
		}
		if fields[0] != "allow" {
			return nil, fmt.Errorf("%w: line %d: unknown keyword %q (want \"allow\" or \"limit\")", ErrBadACL, line, cut(fields[0]))
		}
		r := ACLRule{}
		if len(fields) > 1 {
			if op, ok := parseACLOp(fields[1]); ok {
				if version < 2 {
					return nil, fmt.Errorf("%w: line %d: %q: an operation in a rule needs the header \"%s 2\"", ErrBadACL, line, fields[1], aclHeader)
				}
				r.Op = op
				fields = fields[1:]
			}
		}
		if len(fields) < 3 {
			return nil, fmt.Errorf("%w: line %d: \"allow\" needs a client and at least one stream pattern", ErrBadACL, line)
		}
		r.Client, r.Streams = fields[1], fields[2:]
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrBadACL, line, err)
		}
		a.Rules = append(a.Rules, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadACL, err)
	}
	if version == 0 {
		return nil, fmt.Errorf("%w: no header %q", ErrBadACL, fmt.Sprintf("%s %d", aclHeader, ACLVersion))
	}
	return a, nil
}

// maxLimitMembers bounds the number of a "limit members" line.
const maxLimitMembers = 1 << 20

// parseLimit parses the fields of a "limit members N CLIENT PATTERNS"
// line.
func parseLimit(fields []string, version int) (ACLLimit, error) {
	if version < 2 {
		return ACLLimit{}, fmt.Errorf("\"limit\" needs the header \"%s 2\"", aclHeader)
	}
	if len(fields) < 2 || fields[1] != "members" {
		what := ""
		if len(fields) > 1 {
			what = fields[1]
		}
		return ACLLimit{}, fmt.Errorf("unknown limit %q (want \"limit members N CLIENT PATTERN...\")", cut(what))
	}
	if len(fields) < 5 {
		return ACLLimit{}, errors.New("\"limit members\" needs a number, a client and at least one stream pattern")
	}
	n, err := strconv.Atoi(fields[2])
	if err != nil {
		return ACLLimit{}, fmt.Errorf("\"limit members\": %q is not a number", cut(fields[2]))
	}
	l := ACLLimit{Members: n, Client: fields[3], Streams: fields[4:]}
	return l, l.check()
}

// check validates one limit.
func (l ACLLimit) check() error {
	if l.Members < 1 || l.Members > maxLimitMembers {
		return fmt.Errorf("\"limit members\": %d members, want 1 to %d", l.Members, maxLimitMembers)
	}
	return ACLRule{Client: l.Client, Streams: l.Streams}.check()
}

// cut shortens a piece of a bad line for an error message.
func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// String returns the ACL in the file format (ParseACL reads it back):
// version 1 when every rule is a read grant and there is no limit, else
// version 2.
func (a *ACL) String() string {
	version := 1
	if len(a.Limits) > 0 {
		version = 2
	}
	for _, r := range a.Rules {
		if r.Op != ACLRead {
			version = 2
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d\n", aclHeader, version)
	for _, r := range a.Rules {
		op := ""
		if version > 1 {
			op = r.Op.String() + " "
		}
		fmt.Fprintf(&b, "allow %s%s %s\n", op, r.Client, strings.Join(r.Streams, " "))
	}
	for _, l := range a.Limits {
		fmt.Fprintf(&b, "limit members %d %s %s\n", l.Members, l.Client, strings.Join(l.Streams, " "))
	}
	return b.String()
}

// Validate checks every rule and limit: a known kind of client, valid
// patterns, a positive number of members.
func (a *ACL) Validate() error {
	for i, r := range a.Rules {
		if err := r.check(); err != nil {
			return fmt.Errorf("%w: rule %d: %v", ErrBadACL, i+1, err)
		}
	}
	for i, l := range a.Limits {
		if err := l.check(); err != nil {
			return fmt.Errorf("%w: limit %d: %v", ErrBadACL, i+1, err)
		}
	}
	return nil
}

// check validates one rule.
func (r ACLRule) check() error {
	if r.Op > ACLAdmin {
		return fmt.Errorf("unknown operation %d", r.Op)
	}
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

// aclIndex is an ACL compiled for lookups by operation and client.
type aclIndex struct {
	ops    [ACLAdmin + 1]aclGrants
	limits []ACLLimit
}

// aclGrants are the patterns of one operation's grants, by client.
type aclGrants struct {
	any    []string                     // patterns every client may
	byKey  map[socket.CurveKey][]string // by CURVE client key
	byUser map[string][]string          // by PLAIN user
}

// compileACL validates a and indexes it; nil for a nil ACL (no access
// control).
func compileACL(a *ACL) (*aclIndex, error) {
	if a == nil {
		return nil, nil
	}
	ix := &aclIndex{}
	for i := range ix.ops {
		ix.ops[i] = aclGrants{byKey: map[socket.CurveKey][]string{}, byUser: map[string][]string{}}
	}
	for i, r := range a.Rules {
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("%w: rule %d: %v", ErrBadACL, i+1, err)
		}
		c, _ := parseClient(r.Client)
		g := &ix.ops[r.Op]
		switch {
		case c.any:
			g.any = append(g.any, r.Streams...)
		case c.user != "":
			g.byUser[c.user] = append(g.byUser[c.user], r.Streams...)
		default:
			g.byKey[c.key] = append(g.byKey[c.key], r.Streams...)
		}
	}
	for i, l := range a.Limits {
		if err := l.check(); err != nil {
			return nil, fmt.Errorf("%w: limit %d: %v", ErrBadACL, i+1, err)
		}
	}
	ix.limits = a.Limits
	return ix, nil
}

// memberLimit returns the most members the client with cred may have in
// one group of stream (0: no limit): the smallest of the client's own
// limits that match stream or, without one, the smallest of those of "*".
func (ix *aclIndex) memberLimit(cred socket.PeerCredentials, stream string) int {
	own, all := 0, 0
	for _, l := range ix.limits {
		if !matchAny(l.Streams, stream) {
			continue
		}
		c, _ := parseClient(l.Client)
		switch {
		case c.any:
			all = minLimit(all, l.Members)
		case c.user != "" && cred.Mechanism == "PLAIN" && cred.Username == c.user,
			c.user == "" && cred.Mechanism == "CURVE" && cred.ClientKey == c.key:
			own = minLimit(own, l.Members)
		}
	}
	if own > 0 {
		return own
	}
	return all
}

// minLimit returns the smaller of two limits, 0 being none.
func minLimit(a, b int) int {
	if a == 0 {
		return b
	}
	return min(a, b)
}

// allowsOp reports whether the client with cred may do op on stream: a
// grant of op matches it, or (for ACLList) one of read or admin does. A
// dead-letter stream (see deadLetterParents) is open exactly to who may
// do op on its parent stream, whatever the patterns say of its own name:
// a grant of "logs.*" without "logs" does not reach "logs.g.dlq", the
// dead letters of "logs".
func (ix *aclIndex) allowsOp(cred socket.PeerCredentials, op ACLOp, stream string) bool {
	if parents := deadLetterParents(stream); len(parents) > 0 {
		for _, p := range parents {
			if !ix.allowsOp(cred, op, p) {
				return false
			}
		}
		return true
	}
	if op == ACLList {
		return ix.ops[ACLList].match(cred, stream) || ix.ops[ACLRead].match(cred, stream) || ix.ops[ACLAdmin].match(cred, stream)
	}
	return op <= ACLAdmin && ix.ops[op].match(cred, stream)
}

// match reports whether one of g's patterns for cred matches stream.
func (g *aclGrants) match(cred socket.PeerCredentials, stream string) bool {
	if matchAny(g.any, stream) {
		return true
	}
	switch cred.Mechanism {
	case "CURVE":
		return matchAny(g.byKey[cred.ClientKey], stream)
	case "PLAIN":
		return matchAny(g.byUser[cred.Username], stream)
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
	return a.AllowsOp(cred, ACLRead, stream)
}

// AllowsOp reports whether the ACL lets the client with cred do op on
// stream (see ACLOp).
func (a *ACL) AllowsOp(cred socket.PeerCredentials, op ACLOp, stream string) bool {
	ix, err := compileACL(a)
	if err != nil {
		return false
	}
	return ix == nil || ix.allowsOp(cred, op, stream)
}

// MemberLimit returns the most members the client with cred may have in
// one consumer group of stream under the ACL's "limit members" lines; 0
// for no limit (see ACL).
func (a *ACL) MemberLimit(cred socket.PeerCredentials, stream string) int {
	ix, err := compileACL(a)
	if err != nil || ix == nil {
		return 0
	}
	return ix.memberLimit(cred, stream)
}
