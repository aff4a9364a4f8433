package group

import (
	"time"

	"github.com/fastmq/fastmq/patterns/group/internal/durable"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/spool"
)

// seekLocked moves g's cursor to the request's start position on l (op
// seek, see the package doc): every lease and pending redelivery is
// dropped (a member's later settle of one is refused: the record is not
// pending any more), the records before the position count as settled
// (skipped: neither acknowledged nor dead-lettered) and the records from
// it on are delivered anew, first deliveries. The parked fetches stay
// and are served from the new cursor. It returns the new cursor.
func (s *Server) seekLocked(g *state, l *spool.Log, req wire.Request) uint64 {
	target := s.seekTarget(l, req.Start, req.StartValue)
	dropped := len(g.Pend) + g.InRuns
	g.Pend = make(map[uint64]*durable.Pending)
	g.Runs, g.InRuns = nil, 0
	g.Held = make(map[string]int)
	g.Keys = make(map[string][]uint64)
	g.Avail = 0
	g.Done = nil
	g.Floor, g.Next = target, target
	// The journal records changes that only move forward: a seek is
	// written as a snapshot.
	g.Dirty, g.NeedSnap = true, true
	s.log.Info("group seek", "stream", g.Stream, "group", g.Group, "offset", target, "dropped", dropped)
	return target
}

// seekTarget resolves a start position on l, within what l holds and
// the server may lease.
func (s *Server) seekTarget(l *spool.Log, start uint8, value uint64) uint64 {
	oldest, next := l.OldestOffset(), s.end(l)
	switch start {
	case StartLatest:
		return next
	case StartOffset:
		return min(max(value, oldest), next)
	case StartTime:
		if off, err := l.SeekTime(time.Unix(0, int64(value))); err == nil {
			return min(max(off, oldest), next)
		}
		return next // after every record: nothing that recent
	}
	return oldest
}

// wakeFlusher asks the flusher for a group commit.
func (s *Server) wakeFlusher() {
	select {
	case s.wakeFlush <- struct{}{}:
	default:
	}
}
