package spool

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// SetFloor sets the lowest offset the caller still needs. Retention then
// deletes a segment only if every offset in it is below floor (the segment
// ends at or before floor). The default, before any call, is no floor.
func (l *Log) SetFloor(offset uint64) { l.floor.Store(offset) }

// ApplyRetention deletes the oldest whole segments that Config.RetentionAge
// or Config.RetentionBytes says to delete, never the segment being written
// and never one holding an offset at or above the floor (SetFloor). It
// returns the names of the deleted segment files. The Log also runs it every
// Config.RetentionInterval and after each segment roll.
func (l *Log) ApplyRetention() ([]string, error) {
	if l.readOnly {
		return nil, ErrReadOnly
	}
	floor := l.floor.Load()
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
	var victims []*segment
	for len(l.segs) > 1 {
		s := l.segs[0]
		if l.segs[1].base > l.next || s.end > floor {
			break
		}
		old := l.cfg.RetentionAge > 0 && s.maxTs < now-int64(l.cfg.RetentionAge)
		big := l.cfg.RetentionBytes > 0 && total > l.cfg.RetentionBytes
		if !old && !big {
			break
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
		if _, err := l.ApplyRetention(); err != nil && !errors.Is(err, ErrClosed) {
			l.log.Error("retention failed", "err", err)
		}
	}
}
