package pull

import "fmt"

// The spool server's side of its ACL: who may read, list or administer
// which stream, for its own requests and its Extensions', and the one
// reply a refusal gets.

// MemberLimit is ACL.MemberLimit for the peer of the ROUTER envelope env
// under the server's ACL: 0 (no limit) without an ACL or for a peer the
// server no longer knows. It is for the consumer group server
// (group.ServerConfig.MemberLimit).
func (s *Server) MemberLimit(env [][]byte, stream string) int {
	ix := s.acl.Load()
	if ix == nil || len(ix.limits) == 0 || len(env) == 0 {
		return 0
	}
	cred, ok, err := s.sock.PeerCredentials(env[0])
	if err != nil || !ok {
		return 0
	}
	return ix.memberLimit(cred, stream)
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
	return s.AllowedOp(env, ACLRead, stream)
}

// AllowedOp is Allowed for an operation of the ACL (see ACLOp): whether
// the peer of env may do op on stream.
func (s *Server) AllowedOp(env [][]byte, op ACLOp, stream string) bool {
	ix := s.acl.Load()
	if ix == nil {
		return true
	}
	if len(env) > 0 {
		cred, ok, err := s.sock.PeerCredentials(env[0])
		if err == nil && ok && ix.allowsOp(cred, op, stream) {
			return true
		}
	}
	s.forbidden.Add(1)
	return false
}

// ForbiddenMessage is the message of every StatusForbidden reply for
// stream: it says nothing of whether the stream exists.
func ForbiddenMessage(stream string) string {
	return ForbiddenOpMessage(ACLRead, stream)
}

// ForbiddenOpMessage is ForbiddenMessage for an operation of the ACL:
// "this client may not list stream ...", say.
func ForbiddenOpMessage(op ACLOp, stream string) string {
	verb := op.String()
	if op == ACLAdmin {
		verb = "administer"
	}
	return fmt.Sprintf("this client may not %s stream %q", verb, stream)
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
