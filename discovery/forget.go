package discovery

import (
	"context"
	"errors"
	"fmt"
)

// ErrAlive is returned by Forget for a member gossip reports alive: only a
// failed or left member can be forgotten.
var ErrAlive = errors.New("discovery: member is alive")

// statusIn returns the status of member name in mems.
func statusIn(mems []Member, name string) (Status, bool) {
	for _, mem := range mems {
		if mem.Name == name {
			return mem.Status, true
		}
	}
	return 0, false
}

// Forget removes the failed or left member name from the member list of
// every node, as serf's force-leave with prune does: the member is gone
// from Members at once on this node and as the broadcast spreads on the
// others, instead of lingering until gossip reaps it. Those who remember
// what a failed member served (the console's last known lag, say) drop it
// when the member is gone. A member that comes back later joins as new.
//
// A member this node does not know (it joined after the member failed)
// is looked up with AskMembers. Forget refuses an alive member (ErrAlive)
// and one no member knows (ErrInvalid). It blocks until the broadcast went out (bounded by ctx
// and the profile's broadcast timeout).
func (m *Membership) Forget(ctx context.Context, name string) error {
	if m.isClosed() {
		return ErrClosed
	}
	st, known := statusIn(m.Members(), name)
	if !known {
		// A node that joined recently never saw the members that failed
		// before: the others tell.
		rep, err := m.AskMembers(ctx, MembersQuery{})
		if err != nil {
			return err
		}
		st, known = statusIn(rep.Departed, name)
	}
	switch {
	case !known:
		return fmt.Errorf("%w: forget %q: no such member", ErrInvalid, name)
	case st == StatusAlive:
		return fmt.Errorf("forget %q: %w", name, ErrAlive)
	}
	err := m.serfCall(ctx, func() error { return m.serf.RemoveFailedNodePrune(name) })
	if err != nil && !errors.Is(err, ErrClosed) && ctx.Err() == nil {
		return fmt.Errorf("discovery: forget %q: %w", name, err)
	}
	return err
}
