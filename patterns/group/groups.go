package group

import (
	"fmt"
	"time"

	"github.com/fastmq/fastmq/patterns/group/internal/durable"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/spool"
)

// A group's state on the publisher: finding or loading it for a request,
// and its settings, which only the group's creation and an operator's
// configure change, within bounds.

// groupLocked returns the group's state, loading it from disk or (for a
// fetch) creating it; nil for an unknown group.
func (s *Server) groupLocked(req wire.Request, l *spool.Log) (*state, error) {
	key := req.Stream + "\x00" + req.Group
	if g := s.groups[key]; g != nil {
		if req.Op == wire.OpFetch {
			s.applySettingsLocked(g, req)
		}
		return g, nil
	}
	st, rec, err := durable.Load(s.cfg.Dir, req.Stream, req.Group)
	if err != nil {
		if !s.damaged[key] {
			s.damaged[key] = true
			s.log.Error("group state damaged: the group is stopped here until repaired (fastmq group repair)", "stream", req.Stream, "group", req.Group, "err", err)
		}
		return nil, fmt.Errorf("%w (repair it: fastmq group repair)", err)
	}
	if st != nil {
		delete(s.damaged, key)
	}
	if st != nil && !s.known.has(req.Stream, req.Group) {
		// A state from before groups.known: the next commit writes its
		// snapshot, which notes it there.
		st.Dirty = true
		s.wakeFlusher()
	}
	var g *state
	if st != nil {
		g = newGroupState(st)
	}
	if rec.TornBytes > 0 {
		s.log.Warn("torn journal tail cut", "stream", req.Stream, "group", req.Group,
			"offset", rec.TornAt, "bytes", rec.TornBytes, "err", rec.TornErr)
	}
	if g != nil {
		if end, cut := durable.FollowEpoch(g.State, l); cut {
			s.log.Warn("group state cut back to the stream's epoch: the records beyond were lost by the publisher's disk",
				"stream", req.Stream, "group", req.Group, "offset", end)
		}
	}
	lost := g == nil && s.known.has(req.Stream, req.Group)
	if lost && req.Op == wire.OpFetch {
		if !s.damaged[key] {
			s.damaged[key] = true
			s.log.Error("group state vanished: the group waits for an operator's seek (fastmq group seek) rather than deliver again what it had settled",
				"stream", req.Stream, "group", req.Group)
		}
		return nil, fmt.Errorf("%w: the state of group %s of stream %s vanished; it waits for an operator's seek (fastmq group seek)", ErrStateLost, req.Group, req.Stream)
	}
	if g == nil {
		if req.Op != wire.OpFetch && !(lost && req.Op == wire.OpSeek) {
			return nil, nil
		}
		if len(s.groups) >= MaxGroups {
			return nil, fmt.Errorf("group: this publisher already serves %d groups (MaxGroups)", MaxGroups)
		}
		start := l.OldestOffset()
		switch req.Start {
		case StartLatest:
			start = s.end(l)
		case StartOffset:
			start = max(req.StartValue, start)
		case StartTime:
			if off, err := l.SeekTime(time.Unix(0, int64(req.StartValue))); err == nil {
				start = off
			}
		}
		g = newGroupState(durable.New(req.Stream, req.Group, durable.Settings{}, start))
		g.Epoch, _ = l.Epoch()
		g.EpochKnown, g.Dirty = true, true
		if lost {
			delete(s.damaged, key)
			s.log.Error("group state vanished: recreated by an operator's seek", "stream", req.Stream, "group", req.Group)
		} else {
			s.log.Info("new group", "stream", req.Stream, "group", req.Group, "offset", start)
		}
	}
	if g.Set.Ordered {
		s.rekey(g, l)
	}
	if req.Op == wire.OpFetch {
		s.applySettingsLocked(g, req)
	}
	if g.Floor < l.OldestOffset() {
		// Retention removed records the group never settled.
		s.log.Warn("group behind retention", "stream", req.Stream, "group", req.Group, "offset", g.Floor)
	}
	s.groups[key] = g
	return g, nil
}

// maxJoined bounds the members a group remembers having told that its
// settings are not theirs (state.joined): beyond, it forgets them.
const maxJoined = 4096

// applySettingsLocked makes the settings a fetch asks for (AckWait,
// MaxDeliver, Backoff) the group's only if the group has none yet: the
// fetch that creates the group configures it. A member's fetch never
// changes them after (a member joining later with a 1 ms AckWait would
// have every other member's leases expire): only an operator's Configure
// does (op configure). A member asking for other settings is logged once.
func (s *Server) applySettingsLocked(g *state, req wire.Request) {
	if g.Set.AckWait == 0 { // a new group, or one whose state kept none
		g.Set = settingsOf(req, g.Set)
		g.Dirty = true
		return
	}
	if _, noted := g.joined[req.Member]; noted {
		return
	}
	if len(g.joined) >= maxJoined {
		clear(g.joined)
	}
	g.joinSeq++
	g.joined[req.Member] = g.joinSeq
	if set := settingsOf(req, g.Set); !set.Equal(&g.Set) {
		s.log.Info("member asks for other group settings; the group's stand (an operator's group configure changes them)", "stream", g.Stream, "group", g.Group,
			"member", req.Member, "ack_wait", set.AckWait, "max_deliver", set.MaxDeliver, "backoff", set.Backoff,
			"group_ack_wait", g.Set.AckWait, "group_max_deliver", g.Set.MaxDeliver, "group_backoff", g.Set.Backoff)
	}
}

// forgetLocked drops the members gone says so from the group's join
// order: the settings of one that set them give way to the next fetch.
func forgetLocked(g *state, gone func(member string) bool) {
	for m := range g.joined {
		if gone(m) {
			delete(g.joined, m)
		}
	}
	for m := range g.owners {
		if gone(m) {
			delete(g.owners, m)
		}
	}
}

func settingsOf(req wire.Request, old durable.Settings) durable.Settings {
	set := durable.Settings{AckWait: time.Duration(req.AckWaitMillis) * time.Millisecond, MaxDeliver: int(req.MaxDeliver),
		Backoff: req.Backoff, Ordered: old.Ordered}
	if old.AckWait == 0 { // a new group: ordered or not for good
		set.Ordered = req.Flags&wire.FlagOrdered != 0
	}
	if set.AckWait <= 0 {
		set.AckWait = DefaultAckWait
	}
	// What a member asks for is bounded here: a peer must not hold leases
	// for ever (nor lease a whole stream at once: maxAckPendingOf), nor
	// have them all run out at once.
	set.AckWait = min(max(set.AckWait, MinAckWait), MaxAckWait)
	return set
}

// maxAckPendingOf is the leases the member of req may hold on this
// publisher: its own MaxAckPending, bounded by MaxMemberLeases.
func (s *Server) maxAckPendingOf(req wire.Request) int {
	n := int(req.MaxAckPending)
	if n <= 0 {
		n = DefaultMaxAckPending
	}
	return min(n, s.cfg.MaxMemberLeases)
}

// Bounds on what a member may ask for, whatever its request says.
const (
	// MaxMaxAckPending caps a member's MaxAckPending per publisher.
	MaxMaxAckPending = 65536
	// MaxAckWait caps a lease's length.
	MaxAckWait = time.Hour
	// MinAckWait is the shortest lease: a group asked for less gets it.
	MinAckWait = 100 * time.Millisecond
	// maxFetchRecords and maxFetchBytes cap one fetch's reply.
	maxFetchRecords = 4096
	maxFetchBytes   = 8 << 20
	// maxParked caps the fetches parked at one group (one per member, two
	// with wire.FlagPipeline).
	maxParked = 8192
	// MaxGroups caps the groups one publisher keeps state for: any fetch
	// naming a new group creates one.
	MaxGroups = 1024
)
