package spool

import (
	"fmt"
	"os"
)

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
					if changed {
						close(l.notify)
						l.notify = make(chan struct{})
					}
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
		bs := s.batches
		s.batches = nil
		l.addBatches(s, bs)
		l.segs = append(l.segs, s)
		l.next = s.end
		have = true
		changed = true
	}
	if changed {
		close(l.notify)
		l.notify = make(chan struct{})
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
	s.size, s.end = res.end, res.next
	return res, true, nil
}

func (l *Log) addBatches(s *segment, bs []batchIdx) {
	for _, b := range bs {
		l.cumMax = max(l.cumMax, b.maxTs)
		b.cumMax = l.cumMax
		s.maxTs = max(s.maxTs, b.maxTs)
		s.batches = append(s.batches, b)
		s.end = b.end()
		l.next = s.end
	}
}
