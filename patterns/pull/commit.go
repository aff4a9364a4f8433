package pull

import (
	"errors"
	"fmt"
	"time"

	"github.com/fastmq/fastmq/spool"
)

// Ack acknowledges m: its position may be committed once every earlier
// record of the same publisher is acknowledged too.
func (c *Consumer) Ack(m Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := c.pubs[m.Publisher]
	if ps == nil || m.gen != ps.gen && (m.gen != ps.keepGen || m.Offset >= ps.keepBelow) {
		return // unknown, or from before a reset that moved past it
	}
	ps.acks.ack(m.Offset)
}

// Commit writes the acknowledged positions to the offset store. It is a
// no-op without one.
func (c *Consumer) Commit() error {
	if c.cfg.Offsets == nil {
		return nil
	}
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	type todo struct {
		name string
		pos  spool.Position
	}
	var work []todo
	c.mu.Lock()
	for name, ps := range c.pubs {
		if ps.acks.floor() == ps.commit {
			continue
		}
		// A position is committed with the log and epoch it is in, once
		// they are known (the first reply of a fresh start tells them).
		if p, ok := ps.commitPositionLocked(); ok {
			work = append(work, todo{name, p})
		}
	}
	c.mu.Unlock()
	var errs []error
	for _, w := range work {
		if err := c.cfg.Offsets.CommitPosition(w.name, c.cfg.Stream, w.pos); err != nil {
			errs = append(errs, fmt.Errorf("pull: commit %s/%s at %d: %w", w.name, c.cfg.Stream, w.pos.Next, err))
			continue
		}
		c.mu.Lock()
		if ps := c.pubs[w.name]; ps != nil {
			ps.commit = w.pos.Next
		}
		c.mu.Unlock()
	}
	return errors.Join(errs...)
}

func (c *Consumer) commitLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			if err := c.Commit(); err != nil {
				c.log.Error("commit offsets", "err", err)
			}
		}
	}
}
