package console

import (
	"context"
	"sort"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/metrics"
)

// lastKnown is what the console last had of a member's status, and since
// when the member has been down (zero while it answers).
type lastKnown struct {
	state     fastmq.Status
	downSince time.Time
}

// memory keeps the last status each member answered, so that a publisher
// that died with records unhandled keeps its streams and groups (and
// their lag) in every view until it comes back or an operator forgets it
// (discovery.Membership.Forget: fastmq members --forget). Its owner
// guards it.
type memory map[string]*lastKnown

// fill records what ms had of each member and gives each down member
// that answered before its last known state: State set, Stale true and
// DownSince the first gathering that found it down. A member gone from
// gossip (forgotten, or reaped) is forgotten here too, unless it is
// still in ms (a publisher our consumers still expect).
func (mem memory) fill(ms *MeshStatus) {
	in := make(map[string]bool, len(ms.Members))
	for i := range ms.Members {
		mm := &ms.Members[i]
		in[mm.Name] = true
		if mm.State != nil {
			mem[mm.Name] = &lastKnown{state: *mm.State}
			continue
		}
		lk := mem[mm.Name]
		if lk == nil || !mm.Down {
			continue
		}
		if lk.downSince.IsZero() {
			lk.downSince = ms.Time
		}
		st := lk.state
		mm.State, mm.Stale, mm.DownSince = &st, true, lk.downSince
	}
	for name := range mem {
		if !in[name] {
			delete(mem, name)
		}
	}
}

// downPublishers lists the members whose last known state fill kept
// because they are down, for /metrics.
func (mem memory) downPublishers() []lastKnown {
	var out []lastKnown
	for _, lk := range mem {
		if !lk.downSince.IsZero() {
			out = append(out, *lk)
		}
	}
	return out
}

// metricsSnapshot is what /metrics serves: the node's metrics and the
// down publishers' last known state. A memory older than RateWindow is
// refreshed first (a gathering, bounded by Config.Timeout), so that a
// scraper alone sees a publisher go down.
func (c *Console) metricsSnapshot(a access) metrics.Snapshot {
	c.mu.Lock()
	stale := c.last == nil || time.Since(c.last.Mesh.Time) > RateWindow
	c.mu.Unlock()
	if stale {
		c.Mesh(context.Background())
	}
	st := c.cfg.Node.Status()
	filterStatus(&st, a)
	snap := metrics.FromStatus(st)
	c.mu.Lock()
	down := c.mem.downPublishers()
	c.mu.Unlock()
	for _, lk := range down {
		filterStatus(&lk.state, a)
		snap.Down = append(snap.Down, metrics.DownFrom(lk.state, lk.downSince))
	}
	sort.Slice(snap.Down, func(i, j int) bool { return snap.Down[i].Name < snap.Down[j].Name })
	return snap
}
