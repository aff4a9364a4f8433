package spool

import (
	"errors"
	"fmt"
	"os"
)

// Bytes returns the bytes in the log's segment files (as Stats().Bytes,
// without Stats' walk over the index).
func (l *Log) Bytes() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// DropOldestSegment deletes the oldest whole segment, whatever the
// retention settings and the floor (SetFloor) say, for a caller that must
// free disk space (a node's disk guard). It never deletes the segment
// being written. It returns the deleted file's name and size, or "" and 0
// when only that segment is left.
func (l *Log) DropOldestSegment() (name string, size int64, err error) {
	if l.readOnly {
		return "", 0, ErrReadOnly
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return "", 0, ErrClosed
	}
	if len(l.segs) < 2 || l.segs[1].base > l.next {
		l.mu.Unlock()
		return "", 0, nil
	}
	s := l.segs[0]
	l.segs = l.segs[1:]
	l.mu.Unlock()
	s.f.Close()
	if e := os.Remove(s.path); e != nil && !os.IsNotExist(e) {
		return "", 0, fmt.Errorf("spool: remove segment: %w", e)
	}
	l.log.Warn("segment dropped to free disk space", "segment", s.name, "offset", s.base, "end", s.end, "bytes", s.size)
	return s.name, s.size, errors.Join(fsyncDir(l.cfg.Dir))
}
