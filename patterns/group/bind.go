package group

import (
	"encoding/hex"
	"fmt"
	"time"

	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/socket"
)

// A member id is only what a request says: a publisher binds it to the
// connection that first used it in the group (its ROUTER routing
// identity) and to the key its handshake proved (the CURVE client key,
// or the PLAIN user name), so that another connection sending the id
// cannot ack, nak, term or release the member's leases. The id moves to
// another connection only with the same key, once the bound one is gone
// (a member reconnecting): the spool server tells (PeerCredentials),
// or, without it, once the bound connection was silent for the group's
// AckWait.

// peerCredentials is what a Sender may offer to tell a client's
// credentials and whether it is connected; *pull.Server does.
type peerCredentials interface {
	PeerCredentials(env [][]byte) (socket.PeerCredentials, bool)
}

// binding is the connection a member id is bound to in a group.
type binding struct {
	route string // the envelope's first frame: the ROUTER routing identity
	key   string // "curve:<hex>", "plain:<user>", or "" (NULL)
	seen  time.Time
}

// credKey returns the authenticated key of a client's credentials.
func credKey(cred socket.PeerCredentials) string {
	switch {
	case cred.ClientKey != (socket.CurveKey{}):
		return "curve:" + hex.EncodeToString(cred.ClientKey[:])
	case cred.Username != "":
		return "plain:" + cred.Username
	}
	return ""
}

// bindLocked checks that the member of req speaks from the connection its
// id is bound to in g, binding it on its first request; a refusal is the
// reply to send.
func (s *Server) bindLocked(g *state, env [][]byte, req wire.Request, now time.Time) *wire.Reply {
	route := ""
	if len(env) > 0 {
		route = string(env[0])
	}
	b := g.owners[req.Member]
	if b != nil && (b.route == route || s.shareIDs) {
		b.seen = now // the hot path: the bound connection
		return nil
	}
	pc, canAsk := s.cfg.Send.(peerCredentials)
	key := ""
	if canAsk {
		cred, _ := pc.PeerCredentials(env)
		key = credKey(cred)
	}
	if b == nil {
		if g.owners == nil {
			g.owners = make(map[string]*binding)
		}
		if len(g.owners) >= s.cfg.MaxMembers {
			s.pruneOwnersLocked(g, pc, canAsk, now)
		}
		if len(g.owners) >= s.cfg.MaxMembers {
			s.log.Warn("group has its most members: a new one refused", "stream", g.Stream, "group", g.Group,
				"member", req.Member, "max_members", s.cfg.MaxMembers)
			return &wire.Reply{Status: wire.StatusLimitReached, ID: req.ID,
				Data: fmt.Appendf(nil, "group %s of stream %s has its most members here (%d)", g.Group, g.Stream, s.cfg.MaxMembers)}
		}
		if rep := s.principalLimitLocked(g, env, key, pc, canAsk, req, now); rep != nil {
			return rep
		}
		g.owners[req.Member] = &binding{route: route, key: key, seen: now}
		return nil
	}
	var gone bool
	if canAsk {
		_, connected := pc.PeerCredentials([][]byte{[]byte(b.route)})
		gone = !connected
	} else {
		gone = now.Sub(b.seen) > g.Set.AckWait
	}
	if b.key != key || !gone {
		s.log.Warn("member id used by another connection: refused", "stream", g.Stream, "group", g.Group, "member", req.Member)
		return &wire.Reply{Status: wire.StatusUnavailable, ID: req.ID,
			Data: fmt.Appendf(nil, "member %s is bound to another connection", req.Member)}
	}
	b.route, b.seen = route, now
	return nil
}

// principalLimitLocked refuses a new member of g beyond the members its
// client's key may have there (ServerConfig.MemberLimit).
func (s *Server) principalLimitLocked(g *state, env [][]byte, key string, pc peerCredentials, canAsk bool, req wire.Request, now time.Time) *wire.Reply {
	if s.cfg.MemberLimit == nil {
		return nil
	}
	limit := s.cfg.MemberLimit(env, g.Stream, g.Group)
	if limit <= 0 {
		return nil
	}
	count := func() (n int) {
		for _, b := range g.owners {
			if b.key == key {
				n++
			}
		}
		return n
	}
	if count() >= limit {
		s.pruneOwnersLocked(g, pc, canAsk, now)
	}
	if count() < limit {
		return nil
	}
	s.log.Warn("client has its most members in the group: a new one refused", "stream", g.Stream, "group", g.Group,
		"member", req.Member, "member_limit", limit)
	return &wire.Reply{Status: wire.StatusLimitReached, ID: req.ID,
		Data: fmt.Appendf(nil, "this client has its most members in group %s of stream %s here (%d)", g.Group, g.Stream, limit)}
}

// pruneOwnersLocked unbinds the members of g that hold no lease and no
// parked fetch and are idle: silent for the longest fetch wait plus
// AckWait, or (when the spool server tells) whose connection is gone.
func (s *Server) pruneOwnersLocked(g *state, pc peerCredentials, canAsk bool, now time.Time) {
	parked := make(map[string]bool, len(g.parked))
	for _, p := range g.parked {
		parked[p.req.Member] = true
	}
	idle := s.cfg.MaxWait + g.Set.AckWait
	for m, b := range g.owners {
		if g.Held[m] > 0 || parked[m] {
			continue
		}
		gone := now.Sub(b.seen) > idle
		if !gone && canAsk {
			_, connected := pc.PeerCredentials([][]byte{[]byte(b.route)})
			gone = !connected
		}
		if gone {
			delete(g.owners, m)
		}
	}
}

// disconnectedLocked tells whether no connection member is bound to is
// open, as far as the spool server tells (without PeerCredentials, true).
func (s *Server) disconnectedLocked(member string) bool {
	pc, ok := s.cfg.Send.(peerCredentials)
	if !ok {
		return true
	}
	for _, g := range s.groups {
		if b := g.owners[member]; b != nil {
			if _, connected := pc.PeerCredentials([][]byte{[]byte(b.route)}); connected {
				return false
			}
		}
	}
	return true
}
