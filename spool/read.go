package spool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

// Wait blocks until the record at offset is readable (NextOffset() > offset)
// and returns nil, or returns ctx.Err() or ErrClosed, or, on a read-only Log
// whose valid data ends in damage before offset, that damage (see Damage).
// It does not poll: the writer (or, for a read-only Log, an inotify watch)
// wakes it.
func (l *Log) Wait(ctx context.Context, offset uint64) error {
	return l.wait(ctx, offset, nil)
}

// wait is Wait that also returns ErrClosed when stop is closed.
func (l *Log) wait(ctx context.Context, offset uint64, stop <-chan struct{}) error {
	for {
		l.mu.RLock()
		if l.closed {
			l.mu.RUnlock()
			return ErrClosed
		}
		if l.next > offset {
			l.mu.RUnlock()
			return nil
		}
		ch := l.notify
		l.mu.RUnlock()
		if ready, err := l.catchUp(offset); err != nil || ready {
			return err
		}
		if err := l.damageErr(); err != nil {
			return err // nothing will be readable past it
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.closeCh:
			return ErrClosed
		case <-stop:
			return ErrClosed
		}
	}
}

// ReadRaw returns whole stored batches exactly as on disk (still compressed,
// for DecodeBatches or for sending over the network), starting with the batch
// that contains from. It returns at least one batch, even one bigger than
// maxBytes, and otherwise stops before exceeding maxBytes; it does not cross
// a segment boundary. next is the offset after the last record returned. When
// from >= NextOffset() it returns no data and next == from, and no error
// unless a read-only Log found damage there (see Damage). Below
// OldestOffset it returns an *OutOfRangeError. The returned slice is new and
// owned by the caller.
func (l *Log) ReadRaw(from uint64, maxBytes int) ([]byte, uint64, error) {
	return l.readRaw(nil, from, maxBytes)
}

// readRaw is ReadRaw reading into buf when its capacity suffices (the
// result then aliases buf), else into a new slice.
func (l *Log) readRaw(buf []byte, from uint64, maxBytes int) ([]byte, uint64, error) {
	if _, err := l.catchUp(from); err != nil {
		return nil, from, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, from, ErrClosed
	}
	if old := l.oldestLocked(); from < old {
		return nil, from, &OutOfRangeError{Requested: from, Oldest: old}
	}
	if from >= l.next {
		return nil, from, l.damageLocked()
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].end > from })
	return readBatches(buf, l.segs[i], l.segs[i].batches, from, maxBytes)
}

// readBatches reads from s the batches of bs (indexed batches of s) from
// the one that holds from: at least that one, then up to maxBytes. It
// reads into buf when its capacity suffices, else into a new slice, and
// returns the offset after the last record read.
func readBatches(buf []byte, s *segment, bs []batchIdx, from uint64, maxBytes int) ([]byte, uint64, error) {
	j := sort.Search(len(bs), func(j int) bool { return bs[j].end() > from })
	start := bs[j].pos
	end := start + int64(bs[j].size)
	k := j + 1
	for k < len(bs) && end+int64(bs[k].size)-start <= int64(maxBytes) {
		end += int64(bs[k].size)
		k++
	}
	var data []byte
	if n := int(end - start); n <= cap(buf) {
		data = buf[:n]
	} else {
		data = make([]byte, n)
	}
	if _, err := s.f.ReadAt(data, start); err != nil {
		return nil, from, fmt.Errorf("spool: read segment %s: %w", s.name, err)
	}
	return data, bs[k-1].end(), nil
}

// SeekTime returns the first offset whose record time is at or after t
// (NextOffset when there is none). Batches are found through the in-memory
// time index; only candidate batches are read.
func (l *Log) SeekTime(t time.Time) (uint64, error) {
	tn := t.UnixNano()
	if _, err := l.catchUp(latest); err != nil {
		return 0, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, ErrClosed
	}
	i := sort.Search(len(l.segs), func(i int) bool {
		// The running maximum time up to the end of segment i: an empty
		// segment (left by a repair or a crash after a roll) carries the
		// maximum of the segments before it, keeping the predicate monotonic.
		for k := i; k >= 0; k-- {
			if s := l.segs[k]; len(s.batches) > 0 {
				return s.batches[len(s.batches)-1].cumMax >= tn
			}
		}
		return false
	})
	for ; i < len(l.segs); i++ {
		s := l.segs[i]
		j := sort.Search(len(s.batches), func(j int) bool { return s.batches[j].cumMax >= tn })
		for ; j < len(s.batches); j++ {
			b := s.batches[j]
			if b.maxTs < tn {
				continue
			}
			data := make([]byte, b.size)
			if _, err := s.f.ReadAt(data, b.pos); err != nil {
				return 0, fmt.Errorf("spool: read segment %s: %w", s.name, err)
			}
			found := uint64(math.MaxUint64)
			errFound := errors.New("found")
			err := DecodeBatches(data, 0, l.cfg.MaxBatchBytes, func(r Record) error {
				if r.Time.UnixNano() >= tn {
					found = r.Offset
					return errFound
				}
				return nil
			})
			if err == errFound {
				return found, nil
			}
			if err != nil {
				if ce, ok := err.(*CorruptError); ok {
					ce.Segment, ce.Pos = s.name, b.pos
				}
				return 0, err
			}
		}
	}
	return l.next, nil
}
