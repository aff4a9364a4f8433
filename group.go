package fastmq

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/fastmq/fastmq/internal/streams"
	"github.com/fastmq/fastmq/patterns/group"
)

// GroupConfig configures a consumer group member made by a Node.
type GroupConfig struct {
	// Stream to consume. Required.
	Stream string
	// Group names the consumer group: members that share it split the
	// stream's records (each record goes to one of them); every group
	// gets every record. Required.
	Group string
	// Member configures the member: AckWait, MaxDeliver, Backoff,
	// MaxAckPending, Buffer, Start and the others keep their meaning and
	// defaults from package group. The node sets Stream, Group,
	// Incarnation, Name (its own name: publishers release the member's
	// leases at once when gossip says this node failed or left),
	// Publishers, Discovery, Socket and Logger itself: Group refuses, with
	// an error naming the field, a Member that sets any of them.
	Member group.MemberConfig
}

// groupHost is a node's group server and its members.
type groupHost struct {
	n   *Node
	srv *group.Server
	// incarnation names this start of the node to publishers (see
	// group.MemberConfig.Incarnation): restarted, even within
	// group.FailedGrace on the same address, its old members' leases are
	// released as soon as a new member asks.
	incarnation string

	mu         sync.Mutex
	members    map[*group.Member]struct{}
	closed     bool
	advertised bool // group.MemberService
}

// advertiseMembers advertises group.MemberService once, before the
// node's first member starts: publishers then release this node's leases
// on gossip's event when it fails or leaves.
func (h *groupHost) advertiseMembers() error {
	h.mu.Lock()
	done := h.advertised
	h.mu.Unlock()
	if done {
		return nil
	}
	if err := h.n.members.Advertise(group.MemberServiceOf(h.n.spoolEP)); err != nil {
		return fmt.Errorf("fastmq: advertise group members: %w", err)
	}
	h.mu.Lock()
	h.advertised = true
	h.mu.Unlock()
	return nil
}

// Group starts a member of a consumer group of stream: it leases records
// from every publisher of the stream in the mesh (this node included),
// each record to one member of the group at a time; see package group.
// The node closes it on Close (without a leave: the node leaves the mesh,
// and gossip tells the publishers); its Shutdown earlier is fine and
// releases its leases at once.
func (n *Node) Group(cfg GroupConfig) (*group.Member, error) {
	if !streams.ValidName(cfg.Stream) {
		return nil, fmt.Errorf("%w: %q", ErrBadStreamName, cfg.Stream)
	}
	if !streams.ValidName(cfg.Group) {
		return nil, fmt.Errorf("fastmq: bad group name %q", cfg.Group)
	}
	mcfg := cfg.Member
	if err := nodeOwned("GroupConfig.Member", owned{"Stream", mcfg.Stream}, owned{"Group", mcfg.Group}, owned{"Name", mcfg.Name},
		owned{"Incarnation", mcfg.Incarnation}, owned{"Publishers", mcfg.Publishers}, owned{"Discovery", mcfg.Discovery},
		owned{"Socket", mcfg.Socket}, owned{"Logger", mcfg.Logger}); err != nil {
		return nil, err
	}
	h, err := n.groupHost()
	if err != nil {
		return nil, err
	}
	if err := h.advertiseMembers(); err != nil {
		return nil, err
	}
	mcfg.Stream, mcfg.Group, mcfg.Name = cfg.Stream, cfg.Group, n.cfg.Name
	mcfg.Discovery, mcfg.Socket, mcfg.Logger = n.members, n.sec.ClientSocket(n.cfg.Socket), n.cfg.Logger
	mcfg.Incarnation = h.incarnation
	m, err := group.NewMember(mcfg)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		m.Close()
		return nil, ErrClosed
	}
	h.members[m] = struct{}{}
	h.mu.Unlock()
	return m, nil
}

// GroupStats returns the state of every consumer group of this node's
// streams, by "stream/group" (nil before any group asked this node).
func (n *Node) GroupStats() map[string]group.GroupStats {
	if srv := n.groupServer(); srv != nil {
		return srv.Stats()
	}
	return nil
}

// groupHost returns the node's group host, starting it on first use (New
// does, so every node answers group requests for its streams): the group
// server serves every stream of the node from then on.
func (n *Node) groupHost() (*groupHost, error) {
	n.groupsMu.Lock()
	defer n.groupsMu.Unlock()
	if h := n.groups; h != nil {
		return h, nil
	}
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	srv, err := group.NewServer(group.ServerConfig{
		Dir:     filepath.Join(n.cfg.DataDir, "groups"),
		Lookup:  n.streams.Lookup,
		Open:    n.Stream,
		Send:    n.server,
		Members: n.members,
		Watch:   n.members,
		Logger:  n.cfg.Logger,

		LeaseAfterSync: n.cfg.GroupLeaseAfterSync,
		Authorize:      n.authorizeGroup,
		MemberLimit:    n.memberLimit,
	})
	if err != nil {
		return nil, err
	}
	h := &groupHost{n: n, srv: srv, members: make(map[*group.Member]struct{}), incarnation: group.NewIncarnation()}
	if err := group.Register(n.server, h); err != nil {
		srv.Close()
		return nil, fmt.Errorf("fastmq: serve groups: %w", err)
	}
	n.groups = h
	return h, nil
}

// Handle hands a group request to the group server (pull.Extension),
// which asks the node's ACL first (authorizeGroup).
func (h *groupHost) Handle(env [][]byte, frames [][]byte) { h.srv.Handle(env, frames) }

// Close stops the node's members and its group server; the node's spool
// server calls it as it closes.
func (h *groupHost) Close() error {
	h.mu.Lock()
	h.closed = true
	members := h.members
	h.members = nil
	h.mu.Unlock()
	for m := range members {
		m.Close()
	}
	return h.srv.Close()
}
