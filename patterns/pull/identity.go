package pull

import (
	"context"
	"log/slog"

	"github.com/google/uuid"

	"github.com/fastmq/fastmq/spool"
)

// The consumer's side of the position check (see "Log identity and
// epochs" in the package documentation): what it knows of the log its
// position on a publisher is in, what it sends with every fetch, and what
// it does when the publisher says the position is of another log or past
// the end of its epoch.

// epochMark says that the records delivered from offset from on belong to
// epoch (until the next mark).
type epochMark struct {
	from  uint64
	epoch uint32
}

// setPositionLocked makes p (the committed position, or a start
// position) the publisher's position. checked says p's epoch and log id
// are known (a position committed with CommitPosition, or by a version 1
// offsets file as the zero id in epoch 0); otherwise the fetches skip the
// check (NoEpoch) and the first reply tells the log and epoch. Called
// with c.mu held.
func (ps *pubState) setPositionLocked(p spool.Position, checked bool) {
	ps.acks.reset(p.Next)
	ps.keepBelow = 0
	ps.logID, ps.baseEpoch, ps.marks = p.ID, p.Epoch, nil
	ps.logEpoch, ps.posKnown = NoEpoch, checked
	if checked {
		ps.logEpoch = p.Epoch
	}
}

// learnLocked takes what a version 2 ok fetch reply says of the log: its
// identity, and the epoch of the record before rep.Next. With records
// (from is the first delivered offset), it marks where they begin for
// commits. A version 1 reply teaches nothing but that commits may go on
// with the zero id. Called with c.mu held.
func (ps *pubState) learnLocked(rep Reply, from uint64, records bool) {
	if rep.Version < 2 {
		ps.posKnown = true
		return
	}
	if ps.logID == uuid.Nil {
		ps.logID = rep.LogID
	}
	if !ps.posKnown {
		// A fresh start: the first reply gives the epoch of the start
		// position (with records, that of the first record: at worst a
		// later cut below the start is then taken for another log).
		ps.baseEpoch, ps.posKnown = rep.Epoch, true
	}
	if records && rep.Epoch != ps.epochAtLocked(from) {
		ps.marks = append(ps.marks, epochMark{from: from, epoch: rep.Epoch})
	}
	if records || ps.logEpoch == NoEpoch {
		ps.logEpoch = rep.Epoch
	}
}

// epochAtLocked returns the epoch of the position next: that of the record
// before it, as delivered (or the base epoch when none was). Called with
// c.mu held.
func (ps *pubState) epochAtLocked(next uint64) uint32 {
	for i := len(ps.marks) - 1; i >= 0; i-- {
		if ps.marks[i].from < next {
			return ps.marks[i].epoch
		}
	}
	return ps.baseEpoch
}

// commitPositionLocked returns the position to commit for the
// acknowledged floor, and drops the epoch marks it no longer needs. ok is
// false while the position's log is not known yet. Called with c.mu held.
func (ps *pubState) commitPositionLocked() (spool.Position, bool) {
	next := ps.acks.floor()
	if !ps.posKnown {
		return spool.Position{}, false
	}
	p := spool.Position{Next: next, ID: ps.logID, Epoch: ps.epochAtLocked(next)}
	keep := 0 // marks from the last one below next on are still needed
	for i, m := range ps.marks {
		if m.from < next {
			keep = i
		}
	}
	if keep > 0 {
		ps.baseEpoch = ps.marks[keep-1].epoch
		ps.marks = append(ps.marks[:0], ps.marks[keep:]...)
	}
	return p, true
}

// sameLog reports whether an ok reply comes from the log the publisher's
// position is in: a server stamps every version 2 fetch reply with its
// log's identity, and a log replaced while a fetch was parked shows here.
func (c *Consumer) sameLog(ps *pubState, rep Reply) bool {
	if rep.Version < 2 || rep.LogID == uuid.Nil {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return ps.logID == uuid.Nil || ps.logID == rep.LogID
}

// otherLog handles a publisher whose log is not the one the position was
// read from (StatusOtherLog, or an ok reply of another log): those
// offsets name other records, so the consumer never continues them. It
// starts over by the Start policy, reports it (a warning,
// PublisherStats.OtherLogs) and returns the new position; the first
// record from there is marked Reset. It returns an error only when ctx
// ended or the publisher keeps refusing a start position (the fetcher is
// then stopped).
func (c *Consumer) otherLog(ctx context.Context, pc *pullConn, lg *slog.Logger, ps *pubState, pos uint64, rep Reply, unlisted bool) (uint64, error) {
	c.mu.Lock()
	old, epoch := ps.logID, ps.logEpoch
	ps.otherLogs++
	ps.resets++
	ps.gen++ // acks of the other log's records no longer count
	c.mu.Unlock()
	lg.Warn("publisher serves another log than the position was read from, starting over",
		"offset", pos, "log", old.String(), "epoch", epoch, "now", rep.LogID.String(), "start", c.cfg.Start.Kind.String(), "reason", message(rep.Data))
	next, err := c.policyStart(ctx, pc, ps, unlisted)
	if err != nil {
		if ctx.Err() == nil {
			c.stop(ctx, lg, ps, pos, err)
		}
		return 0, err
	}
	c.mu.Lock()
	ps.setPositionLocked(spool.Position{Next: next}, false)
	ps.fetchPos = next
	ps.commit = ^uint64(0) // commit the new start once its log is known
	c.mu.Unlock()
	return next, nil
}

// diverged handles StatusDiverged: the publisher's log lost records
// [rep.Next, pos) that this consumer read (its tail was cut by recovery
// or spool repair), and those offsets now name other records. It reports
// the range (a warning, PublisherStats.Diverged and RecordsReplaced) and
// moves the position back to rep.Next, still in the same epoch; the first
// record from there is marked Reset.
func (c *Consumer) diverged(lg *slog.Logger, ps *pubState, pos uint64, rep Reply) {
	n := pos - rep.Next
	lg.Warn("records read from the publisher were lost from its log, reading the new records at their offsets",
		"offset", rep.Next, "to", pos, "records", n, "epoch", rep.Epoch, "reason", message(rep.Data))
	c.mu.Lock()
	defer c.mu.Unlock()
	ps.diverged++
	ps.replaced += n
	ps.resets++
	old := ps.gen
	ps.gen++
	keep := ps.marks[:0]
	for _, m := range ps.marks {
		if m.from < rep.Next {
			keep = append(keep, m)
		}
	}
	ps.marks = keep
	if ps.acks.truncate(rep.Next) {
		// Records below rep.Next, delivered and not yet acknowledged,
		// are still the log's: the floor waits for their acks.
		ps.keepGen, ps.keepBelow = old, rep.Next
	} else {
		ps.acks.reset(rep.Next)
		ps.keepBelow = 0
	}
	ps.fetchPos = rep.Next
	ps.logEpoch = rep.Epoch
	if ps.logID == uuid.Nil {
		ps.logID = rep.LogID
	}
}

// committedPosition returns a publisher's committed position: from
// ResumePosition, Resume or the offset store, in that order. checked says
// the position's log and epoch are known, so that the publisher checks
// it (Resume's positions are not checked).
func (c *Consumer) committedPosition(publisher string) (p spool.Position, committed, checked bool) {
	if c.cfg.ResumePosition != nil {
		if p, ok := c.cfg.ResumePosition(publisher); ok {
			return p, true, true
		}
	}
	if c.cfg.Resume != nil {
		if next, ok := c.cfg.Resume(publisher); ok {
			return spool.Position{Next: next}, true, false
		}
	}
	if c.cfg.Offsets != nil {
		if p, ok := c.cfg.Offsets.Position(publisher, c.cfg.Stream); ok {
			return p, true, true
		}
	}
	return spool.Position{}, false, false
}
