package spool

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
)

// preallocStep is how much zero-filled space the writer adds ahead of the
// data at a time (and how much a new segment starts with). Every step is
// put on disk by the next group commit's fdatasync, so it is kept small: a
// commit that carries a step writes that much more, once per step of data.
const preallocStep = 128 << 10

// preallocLow: when a write would leave less zero-filled space than this
// ahead of the data, the writer adds the next step first.
const preallocLow = 32 << 10

// largeSyncBytes: fsyncs that carry more than this on average are not helped
// by preallocated space. The zeros reach the disk with the data, so a step
// pays only while it covers several fsyncs (each of which then overwrites
// blocks instead of growing the file); with larger fsyncs the zeros would
// add as many bytes as they save metadata writes.
const largeSyncBytes = 32 << 10

var zeroBuf = make([]byte, 64<<10)

// writeZeros writes zeros to f over [from, to).
func writeZeros(f *os.File, from, to int64) error {
	for from < to {
		n := min(int64(len(zeroBuf)), to-from)
		if _, err := f.WriteAt(zeroBuf[:n], from); err != nil {
			return fmt.Errorf("spool: preallocate segment: %w", err)
		}
		from += n
	}
	return nil
}

// noSpace reports whether err says the disk (or the user's quota) is full.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// preallocator keeps zero-filled space ahead of the data in the active
// segment, so that fdatasync overwrites blocks that already exist instead of
// growing the file, which saves writing the inode (and, with a journal, a
// journal commit) on most fsyncs.
//
// The writer adds the zeros itself, a small step at a time just before the
// data reaches them, and never fsyncs them: the syncer's next fdatasync
// carries them with the data. There is one stream of fsyncs per file. (An
// earlier design filled 4 MiB at a time in a goroutine of its own and
// fdatasynced the fill: the syncer's fdatasync of the same file then waited
// for the whole fill to reach the disk, a stall of several milliseconds at
// each fill.) FsyncStats counts the zeros each fsync carried.
//
// Preallocation pays only while fsyncs carry little data: the syncer reports
// each fsync's size (observe) and the writer stops zero-filling while they
// are large, when writing the zeros costs more than it saves.
//
// Preallocation is never what makes a write fail: when the disk has no room
// for the zeros, the zeros written are cut off again and the segment goes
// on without preallocation, so that the data takes the space that is left.
//
// The writer calls every method but observe and takeZeros, which the
// syncer calls.
type preallocator struct {
	limit int64 // the segment size: nothing is zero-filled past it

	// writer only
	f      *os.File // the active segment
	alloc  int64    // end of the zero-filled part of f
	full   bool     // the disk had no room for zeros in f: do not preallocate in it
	resEnd int64    // zeros stay below this end of the reserved space (reserve.go); 0: no bound

	small   atomic.Bool  // fsyncs carry little data: preallocate
	zeros   atomic.Int64 // zeros written in the active segment since the syncer last took the count
	syncAvg int64        // syncer only: moving average of bytes per fsync
}

// newPreallocator returns a preallocator for segments of at most limit
// bytes; on says whether to preallocate until the first fsync is observed.
func newPreallocator(limit int64, on bool) *preallocator {
	p := &preallocator{limit: limit}
	p.small.Store(on)
	return p
}

// observe records the size of an fsync (syncer only).
func (p *preallocator) observe(bytes int64) {
	p.syncAvg += (bytes - p.syncAvg) / 8
	p.small.Store(p.syncAvg < largeSyncBytes)
}

// takeZeros returns the zeros written since the last call (syncer only,
// just before its fdatasync, which puts them on disk).
func (p *preallocator) takeZeros() int64 { return p.zeros.Swap(0) }

// prepare zero-fills the first step of a new segment file past its header,
// when preallocation pays, and returns the end of the zeros. reserved > 0
// is the end of the blocks reserved in f (reserve.go), which the zeros do
// not pass. The caller fsyncs the file.
func (p *preallocator) prepare(f *os.File, reserved int64) (int64, error) {
	alloc := int64(segHeaderLen)
	if p.small.Load() {
		alloc = max(alloc, min(p.limit, preallocStep))
		if reserved > 0 {
			alloc = max(int64(segHeaderLen), min(alloc, reserved))
		}
		if err := writeZeros(f, segHeaderLen, alloc); err != nil {
			if !noSpace(err) {
				return 0, err
			}
			if err := f.Truncate(segHeaderLen); err != nil {
				return 0, fmt.Errorf("spool: cut preallocated zeros: %w", err)
			}
			return segHeaderLen, nil // no room for zeros: the data may still fit
		}
	}
	return alloc, nil
}

// reset makes f, zero-filled up to alloc, the file being written.
func (p *preallocator) reset(f *os.File, alloc int64) {
	p.f, p.alloc, p.full, p.resEnd = f, alloc, false, 0
}

// reserve readies the file for a write that ends at end: when preallocation
// pays and less than preallocLow of zeros would be left past end, it writes
// the next step of zeros past the data first.
func (p *preallocator) reserve(end int64) error {
	if !p.small.Load() || p.full || end+preallocLow <= p.alloc || p.alloc >= p.limit {
		return nil
	}
	from := max(p.alloc, end)
	to := min(from+preallocStep, p.limit)
	if p.resEnd > 0 {
		to = min(to, p.resEnd) // within the reserved blocks: a full disk cannot fail it
	}
	if to <= from {
		return nil
	}
	if err := writeZeros(p.f, from, to); err != nil {
		return p.noRoom(err, from)
	}
	p.alloc = to
	p.zeros.Add(to - from)
	return nil
}

// noRoom handles a failed zero-fill that began at from, at or after the
// end of the data and of the zeros before it: a full disk stops
// preallocation in this file and cuts the zeros written at from, so that
// the data gets the space; any other error is returned.
func (p *preallocator) noRoom(err error, from int64) error {
	if !noSpace(err) {
		return err
	}
	p.full = true
	if err := p.f.Truncate(from); err != nil {
		return fmt.Errorf("spool: cut preallocated zeros: %w", err)
	}
	return nil
}

// wrote says the data now ends at pos.
func (p *preallocator) wrote(pos int64) {
	p.alloc = max(p.alloc, pos)
}

// trim reports whether zeros lie past pos; the caller then truncates the
// file to pos and calls reset.
func (p *preallocator) trim(pos int64) bool {
	return p.alloc > pos
}
