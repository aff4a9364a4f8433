package spool

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/fastmq/fastmq/internal/fsutil"
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
// look, and drops segments that retention deleted. Read-only Logs only. Damage
// where the valid data ends is not an error of refresh: it is kept in
// l.damage, which reads return (see Damage).
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
	if l.damage != nil {
		return nil // nothing past damage is read
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
		if l.damage != nil {
			break
		}
		if have && b != l.next && !gapRecorded(l.cfg.Dir, l.next, b) {
			// The writer creates a segment only after the one before it is
			// complete: cut to its data and fsynced. Read the rest of that
			// one now. If it still ends before b, it never will: what
			// follows its last valid batch (or the missing offsets) is
			// damage, as Open would find; report it rather than wait.
			res, added, err := l.scanTail()
			if err != nil {
				return err
			}
			changed = changed || added
			if b != l.next && l.damage == nil {
				prev := l.segs[len(l.segs)-1]
				l.damage = res.bad
				if l.damage == nil {
					l.damage = &CorruptError{Segment: prev.name, Pos: prev.size, Offset: l.next,
						Reason: fmt.Sprintf("segment ends at offset %d but the next one, %s, starts at %d", l.next, segName(b), b)}
				}
				changed = true
			}
			if l.damage != nil {
				break
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
// the last look (l.mu held). Where the valid batches end it tells the end of
// what the writer has written so far (or a torn tail: nothing valid follows)
// from damage (a valid batch follows), as recovery does, and keeps damage in
// l.damage. It returns what the last scan found and whether the Log changed:
// batches added or damage found.
func (l *Log) scanTail() (scanResult, bool, error) {
	s := l.segs[len(l.segs)-1]
	changed := false
	suspect, validAt := int64(-1), int64(0)
	for {
		fi, err := s.f.Stat()
		if err != nil {
			return scanResult{}, changed, fmt.Errorf("spool: stat segment: %w", err)
		}
		res, err := scanSegment(s.f, s.name, s.size, fi.Size(), s.end, true, l.cfg.MaxBatchBytes)
		if err != nil {
			return res, changed, err
		}
		if len(res.batches) > 0 {
			l.addBatches(s, res.batches)
			s.size = res.end
			changed = true
		}
		if res.bad == nil {
			return res, changed, nil
		}
		if res.end == suspect {
			// Still invalid after a valid batch was seen beyond it. A
			// writer writes batches in order, so this one was complete
			// before that look: it is damage, not a batch being written.
			d := *res.bad
			d.Reason += fmt.Sprintf(" (a valid batch follows at byte %d)", validAt)
			l.damage = &d
			return res, true, nil
		}
		at, found, err := l.validAfter(s, res.end, fi.Size(), res.next)
		if err != nil || !found {
			return res, changed, err
		}
		// Read the invalid batch again: it may have been completed
		// between the two looks.
		suspect, validAt = res.end, at
	}
}

// validAfter reports whether a valid batch (nextBatch, through
// findValidAfter) follows the invalid bytes at from in the last segment s,
// and where. Zeros, which a writer preallocates ahead of its data, are
// checked once: s.zeroTo remembers how far the file held only zeros, so a
// follower does not read the preallocated space again on every write, nor
// search it while a batch is being written into it.
func (l *Log) validAfter(s *segment, from, size int64, expect uint64) (int64, bool, error) {
	if from < s.zeroTo && size <= s.zeroTo {
		// All of it held only zeros at an earlier look, and a writer
		// writes in order from the end of its data: the invalid batch
		// here is one being written.
		return 0, false, nil
	}
	var hb [batchHeaderLen]byte
	n, err := s.f.ReadAt(hb[:], from)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, false, fmt.Errorf("spool: read segment %s: %w", s.name, err)
	}
	if fsutil.AllZero(hb[:n]) {
		zero, err := zeroFrom(s.f, max(from, s.zeroTo), size)
		if err != nil {
			return 0, false, fmt.Errorf("spool: read segment %s: %w", s.name, err)
		}
		if zero {
			s.zeroTo = size
			return 0, false, nil
		}
	}
	at, found, err := findValidAfter(s.f, from, size, expect, l.cfg.MaxBatchBytes)
	if err != nil {
		return 0, false, fmt.Errorf("spool: scan segment %s: %w", s.name, err)
	}
	return at, found, nil
}

// Damage reports damage that a read-only Log found where its valid data
// ends: a *CorruptError with the segment, the byte position and the offset
// of the first record that cannot be read, which reads from that offset on
// also return (ReadRaw, Reader.Next, Wait). Invalid bytes at the end of the
// last segment that no valid batch follows are not damage: they are a torn
// tail, or a batch a writer is still writing, and the log simply ends
// there. Damage looks at the directory first, as every read does, and
// returns that look's error if it fails. On a writer's Log it returns nil:
// Open refuses a damaged directory, and damage in older segments is
// reported by the read that finds it.
func (l *Log) Damage() error {
	if _, err := l.catchUp(latest); err != nil {
		return err
	}
	return l.damageErr()
}

// damageErr returns a copy of the damage found, or nil (l.mu not held).
func (l *Log) damageErr() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.damageLocked()
}

func (l *Log) damageLocked() error {
	if l.damage == nil {
		return nil
	}
	d := *l.damage
	return &d
}
