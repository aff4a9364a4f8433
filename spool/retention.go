package spool

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"time"
)

// RetentionForced returns how many records retention's caps
// (Config.RetentionAge, Config.RetentionBytes) removed while
// Config.RetentionFloor still wanted them, since Open.
func (l *Log) RetentionForced() uint64 { return l.forced.Load() }

// BytesFrom returns the bytes of the stored batches from the one holding
// offset to the end of the log (0 at or after NextOffset): about what a
// reader at offset has left to read.
func (l *Log) BytesFrom(offset uint64) int64 {
	_, _ = l.catchUp(latest)
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for i := len(l.segs) - 1; i >= 0; i-- {
		s := l.segs[i]
		if s.end <= offset {
			break
		}
		if len(s.batches) == 0 {
			continue
		}
		if s.batches[0].base >= offset {
			n += s.size - s.batches[0].pos
			continue
		}
		j := sort.Search(len(s.batches), func(j int) bool { return s.batches[j].end() > offset })
		if j < len(s.batches) {
			n += s.size - s.batches[j].pos
		}
		break
	}
	return n
}

// SetFloor sets the lowest offset the caller still needs. Retention then
// deletes a segment only if every offset in it is below floor (the segment
// ends at or before floor). The default, before any call, is no floor.
func (l *Log) SetFloor(offset uint64) { l.floor.Store(offset) }

// ApplyRetention deletes the oldest whole segments that Config.RetentionAge
// or Config.RetentionBytes says to delete, never the segment being written
// and never one holding an offset at or above the floor (SetFloor). With
// Config.RetentionFloor it also deletes the segments whose records are all
// below that floor (see Config.RetentionFloor). It returns the names of
// the deleted segment files. The Log also runs it every
// Config.RetentionInterval and after each segment roll.
func (l *Log) ApplyRetention() ([]string, error) {
	if l.readOnly {
		return nil, ErrReadOnly
	}
	floor := l.floor.Load()
	// The owner's floor is asked before l.mu is taken: it may well look
	// at this Log (NextOffset, OldestOffset) under its own locks.
	want, interest := uint64(0), false
	if l.cfg.RetentionFloor != nil {
		want, interest = l.cfg.RetentionFloor()
	}
	now := time.Now().UnixNano()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	var victims, forced []*segment
	for len(l.segs) > 1 {
		s := l.segs[0]
		if l.segs[1].base > l.next || s.end > floor {
			break
		}
		old := l.cfg.RetentionAge > 0 && s.maxTs < now-int64(l.cfg.RetentionAge)
		big := l.cfg.RetentionBytes > 0 && total > l.cfg.RetentionBytes
		unwanted := interest && s.end <= want
		if !old && !big && !unwanted {
			break
		}
		if interest && !unwanted {
			forced = append(forced, s)
			// Counted before l.mu is let go, so that whoever sees the
			// segment gone (OldestOffset) sees it counted too.
			l.forced.Add(s.end - max(s.base, want))
		}
		victims = append(victims, s)
		total -= s.size
		l.segs = l.segs[1:]
	}
	l.mu.Unlock()
	var removed []string
	var err error
	for _, s := range victims {
		s.f.Close()
		if e := os.Remove(s.path); e != nil && !os.IsNotExist(e) {
			err = errors.Join(err, fmt.Errorf("spool: remove segment: %w", e))
			continue
		}
		removed = append(removed, s.name)
		l.log.Info("segment removed by retention", "segment", s.name, "offset", s.base, "end", s.end)
	}
	for _, s := range forced {
		// The cap (age or size) removed records the owner still wanted.
		n := s.end - max(s.base, want)
		l.log.Warn("retention removed records not yet acknowledged by every group", "segment", s.name,
			"offset", max(s.base, want), "end", s.end, "records", n, "floor", want)
	}
	if len(victims) > 0 {
		err = errors.Join(err, fsyncDir(l.cfg.Dir))
	}
	return removed, err
}

func (l *Log) retainer() {
	defer l.wg.Done()
	t := time.NewTicker(l.cfg.RetentionInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stopCh:
			return
		case <-t.C:
		case <-l.retainCh:
		}
		if l.cfg.RetentionAge > 0 || l.cfg.RetentionBytes > 0 || l.cfg.RetentionFloor != nil {
			if _, err := l.ApplyRetention(); err != nil && !errors.Is(err, ErrClosed) {
				l.log.Error("retention failed", "err", err)
			}
		}
		l.copyHeldTail(false)
	}
}
