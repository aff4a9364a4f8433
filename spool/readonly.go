package spool

import (
	"fmt"
	"math"
	"os"
)

// A read-only Log (OpenReadOnly) has no writer goroutines: its index of
// segments and batches follows the directory, which another process's
// writer changes. Two things keep it current: the watch goroutine
// (sys_linux.go, sys_other.go) calls refresh on every change in the
// directory, and every read first calls catchUp, so that a read never misses
// what was on disk when it began.

// latest asks catchUp to look for new batches whatever the Log holds.
const latest = math.MaxUint64

// catchUp runs before every read of a read-only Log: unless the Log already
// holds offset want, it picks up what the writer has added since the last
// look (see refresh), and it reports whether the Log now holds want
// (NextOffset() > want). On a writer's own Log it does nothing and reports
// false: the syncer keeps that index current and wakes whoever waits.
func (l *Log) catchUp(want uint64) (bool, error) {
	if !l.readOnly {
		return false, nil
	}
	l.mu.RLock()
	ready := l.next > want
	l.mu.RUnlock()
	if ready {
		return true, nil
	}
	if err := l.refresh(); err != nil {
		return false, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.next > want, nil
}

// refresh picks up batches and segments that the writer added since the last
// look, and drops segments that retention deleted. Read-only Logs only.
func (l *Log) refresh() error {
	if !l.readOnly {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	changed := false
	defer func() {
		if changed {
			l.wakeLocked()
		}
	}()
	for len(l.segs) > 1 {
		if _, err := os.Stat(l.segs[0].path); !os.IsNotExist(err) {
			break
		}
		l.segs[0].f.Close()
		l.segs = l.segs[1:]
	}
	bases, err := listSegments(l.cfg.Dir)
	if err != nil {
		return fmt.Errorf("spool: list segments: %w", err)
	}
	var lastBase uint64
	have := len(l.segs) > 0
	if have {
		lastBase = l.segs[len(l.segs)-1].base
	}
	newer := bases[:0:0]
	for _, b := range bases {
		if !have || b > lastBase {
			newer = append(newer, b)
		}
	}
	if have {
		_, added, err := l.scanTail()
		if err != nil {
			return err
		}
		changed = changed || added
	}
	for _, b := range newer {
		if have && b != l.next && !gapRecorded(l.cfg.Dir, l.next, b) {
			// The writer creates a segment only after the one before it is
			// complete: read the rest of that one now. If it still ends
			// before b, what follows its last valid batch is damage that
			// will never be completed: report it rather than wait forever.
			res, added, err := l.scanTail()
			if err != nil {
				return err
			}
			changed = changed || added
			if b != l.next {
				if res.bad != nil {
					return res.bad
				}
				break // zeros or nothing yet: the segment is still being written
			}
		}
		s, err := l.loadSegment(b, true)
		if err != nil {
			return err
		}
		if s == nil {
			break
		}
		l.appendSegment(s)
		have = true
		changed = true
	}
	return nil
}

// scanTail reads the batches the writer appended to the last segment since
// the last look (l.mu held). It returns what the scan found and whether it
// added batches.
func (l *Log) scanTail() (scanResult, bool, error) {
	s := l.segs[len(l.segs)-1]
	fi, err := s.f.Stat()
	if err != nil {
		return scanResult{}, false, fmt.Errorf("spool: stat segment: %w", err)
	}
	res, err := scanSegment(s.f, s.name, s.size, fi.Size(), s.end, true, l.cfg.MaxBatchBytes)
	if err != nil || len(res.batches) == 0 {
		return res, false, err
	}
	l.addBatches(s, res.batches)
	s.size = res.end
	return res, true, nil
}
