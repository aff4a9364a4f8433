package pull

import "time"

// Unacknowledged records. A record handed to Next and never acknowledged
// holds its publisher's committable position (the ack floor) for good. A
// consumer keeps, per publisher, when each batch was first handed to
// Next, so it can tell how long the record at the floor has been out:
// PublisherStats.OldestUnacked reports it, and a warning is logged once
// per stuck record when it passes ConsumerConfig.UnackedWarn.

// handMark says that the records from offset on were first handed to Next
// at time at (the first record of a batch).
type handMark struct {
	offset uint64
	at     time.Time
}

// maxHandMarks bounds the marks kept per publisher. When full, every other
// mark is dropped: the records of a dropped mark are then dated by the
// mark before it, so their age is overstated, never understated.
const maxHandMarks = 4096

// handedLocked records that the batch starting at offset, of position
// generation gen, was first handed to Next at now, and ends before end.
// Called with c.mu held.
func (ps *pubState) handedLocked(gen, offset, end uint64, now time.Time) {
	if gen != ps.gen {
		return // from before a reset: its acks are ignored too
	}
	if ps.handGen != gen {
		ps.handMarks, ps.handGen = ps.handMarks[:0], gen
	}
	if len(ps.handMarks) >= maxHandMarks {
		k := 0
		for i := 0; i < len(ps.handMarks); i += 2 {
			ps.handMarks[k] = ps.handMarks[i]
			k++
		}
		ps.handMarks = ps.handMarks[:k]
	}
	ps.handMarks = append(ps.handMarks, handMark{offset: offset, at: now})
	ps.handEnd = end
}

// oldestUnackedLocked returns the offset of the oldest record handed to
// Next and not acknowledged (the ack floor) and how long ago it was
// handed out; ok is false when every record handed out is acknowledged.
// Called with c.mu held.
func (ps *pubState) oldestUnackedLocked(now time.Time) (offset uint64, age time.Duration, ok bool) {
	if ps.handGen != ps.gen || len(ps.handMarks) == 0 {
		return 0, 0, false
	}
	f := ps.acks.floor()
	if f >= ps.handEnd || f < ps.handMarks[0].offset {
		ps.handMarks = ps.handMarks[:0]
		return 0, 0, false
	}
	i := 0
	for i+1 < len(ps.handMarks) && ps.handMarks[i+1].offset <= f {
		i++
	}
	if i > 0 {
		ps.handMarks = append(ps.handMarks[:0], ps.handMarks[i:]...)
	}
	return f, now.Sub(ps.handMarks[0].at), true
}

// watchUnacked logs a warning when a publisher's oldest unacknowledged
// record has been out longer than UnackedWarn: once per stuck record.
func (c *Consumer) watchUnacked() {
	defer c.wg.Done()
	every := min(max(c.cfg.UnackedWarn/4, 10*time.Millisecond), 5*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case now := <-t.C:
			c.checkUnacked(now)
		}
	}
}

// checkUnacked warns of the records out longer than UnackedWarn.
func (c *Consumer) checkUnacked(now time.Time) {
	type stuck struct {
		name   string
		offset uint64
		age    time.Duration
	}
	var warn []stuck
	c.mu.Lock()
	for name, ps := range c.pubs {
		off, age, ok := ps.oldestUnackedLocked(now)
		if !ok || age < c.cfg.UnackedWarn || (ps.warned && ps.warnedOffset == off && ps.warnedGen == ps.gen) {
			continue
		}
		ps.warned, ps.warnedOffset, ps.warnedGen = true, off, ps.gen
		ps.stuck++
		warn = append(warn, stuck{name, off, age})
	}
	c.mu.Unlock()
	for _, w := range warn {
		c.log.Warn("record delivered but not acknowledged: the publisher's committed position cannot move past it", "peer", w.name, "offset", w.offset, "age", w.age.Round(time.Millisecond))
	}
}
