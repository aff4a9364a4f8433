package spool

// Space reservation: the writer never meets a full disk in the middle of a
// group.
//
// Before the writer decides anything about a group (offsets, duplicates),
// it reserves the disk space the group can take: it allocates the blocks
// ahead of the data in the active segment with fallocate(KEEP_SIZE), and,
// when the group may run past the end of the segment, a spare segment file
// allocated the same way, which the next roll takes instead of creating a
// file. A disk with no room for that makes the group's appends fail with
// ErrNoSpace before any byte of them is written: the log stays as it was,
// usable, and takes appends again once space returns. Writes into
// allocated blocks do not fail for lack of space, and the preallocated
// zeros (prealloc.go) stay within the reservation.
//
// Reserved blocks past the end of the data are released when the segment
// is trimmed (at a roll and at Close), and spare files are removed at
// Close (or at the next Open, as any *.seg.tmp). Where fallocate is not
// supported (some file systems, systems other than Linux), nothing is
// reserved, and a full disk met by a write still fails the log as before.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// reserveStep is how much more than a group needs the writer reserves in
// the active segment when the disk has room, so that it calls fallocate
// about once per step of data rather than per group.
const reserveStep = 1 << 20

// maxSpares bounds the spare segment files reserved for one group: more
// rolls than that within one group (segments much smaller than a group)
// create their segments unreserved.
const maxSpares = 4

// reservation is the writer's reserved space (writer goroutine only).
type reservation struct {
	off     bool  // fallocate is not supported here: reserve nothing
	end     int64 // the active segment's blocks are allocated up to here
	spares  []spareSegment
	nextID  int
	refused int       // records refused since the last log line
	logged  time.Time // when a refusal was last logged
}

// spareSegment is a file allocated ahead for the next segment.
type spareSegment struct {
	f    *os.File
	path string
	size int64 // allocated bytes
}

// groupNeed bounds the bytes a group of n records whose bodies sum to
// size can take on disk, batch headers, length prefixes and a codec's
// worst case on incompressible data included.
func groupNeed(n, size int) int64 {
	raw := int64(size) + int64(n)*24
	return raw + raw/4 + 64<<10
}

// reserve reserves the space a group of n records whose bodies sum to
// size can take, before any of it is written or decided. It returns an
// error matching ErrNoSpace (and the system's error) when the disk has no
// room; the Log is unchanged then. A group of no records (a Sync) needs
// no space and is never refused.
func (l *Log) reserve(n, size int) error {
	r := &l.res
	if r.off || n == 0 {
		return nil
	}
	need := groupNeed(n, size)
	seg := l.cfg.SegmentBytes
	// In the active segment: up to the segment's end, or the whole group
	// when the segment is empty (a batch larger than a segment goes alone).
	inActive := min(l.wpos+need, max(seg, segHeaderLen+need))
	if inActive > r.end {
		want := min(inActive+reserveStep, max(seg, inActive)+preallocStep)
		end, err := l.allocate(l.active.f, r.end, want, inActive)
		if err != nil {
			return l.noRoom(err)
		}
		r.end = end
	}
	if spill := l.wpos + need - seg; spill > 0 {
		// Past the segment's end: spare segments for the rolls.
		per := min(need, seg+need/4) + segHeaderLen + preallocStep
		k := min(maxSpares, 1+int(spill/max(seg/2, 1)))
		for len(r.spares) < k && !r.off {
			if err := l.newSpare(per); err != nil {
				return l.noRoom(err)
			}
		}
	}
	if !r.off {
		l.pre.resEnd = r.end
	}
	return nil
}

// allocate reserves [from, want) of f, or at least [from, must) when the
// disk has no room for more, and returns the end of what is reserved.
func (l *Log) allocate(f *os.File, from, want, must int64) (int64, error) {
	err := fallocateKeepSize(f, from, want-from)
	if err == nil {
		return want, nil
	}
	if noSpace(err) && want > must {
		if err = fallocateKeepSize(f, from, must-from); err == nil {
			return must, nil
		}
	}
	if noSpace(err) {
		return from, err
	}
	l.reservationOff(err)
	return from, nil
}

// reservationOff stops reserving: fallocate is not supported here (or
// failed otherwise, for a call that only reserves). The writer goes on as
// before reservation existed.
func (l *Log) reservationOff(err error) {
	l.res.off = true
	l.pre.resEnd = 0
	l.log.Info("disk space is not reserved ahead of the writer", "err", err)
}

// noRoom is the refusal of a group for lack of space, or err as it is.
func (l *Log) noRoom(err error) error {
	if !noSpace(err) {
		return err
	}
	return fmt.Errorf("%w: reserving space in segment %s: %w", ErrNoSpace, l.active.name, err)
}

// newSpare creates a spare segment file with size bytes allocated.
func (l *Log) newSpare(size int64) error {
	r := &l.res
	r.nextID++
	path := filepath.Join(l.cfg.Dir, "spare-"+strconv.Itoa(r.nextID)+segSuffix+".tmp")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("spool: create spare segment: %w", err)
	}
	if err := fallocateKeepSize(f, 0, size); err != nil {
		f.Close()
		os.Remove(path)
		if noSpace(err) {
			return err
		}
		l.reservationOff(err)
		return nil
	}
	r.spares = append(r.spares, spareSegment{f: f, path: path, size: size})
	return nil
}

// takeSpare returns a spare segment file for a roll, if one is reserved.
func (l *Log) takeSpare() (spareSegment, bool) {
	r := &l.res
	if len(r.spares) == 0 {
		return spareSegment{}, false
	}
	sp := r.spares[0]
	r.spares = append(r.spares[:0], r.spares[1:]...)
	return sp, true
}

// releaseSpares removes the spare segment files (writer stopped).
func (l *Log) releaseSpares() error {
	var errs []error
	for _, sp := range l.res.spares {
		sp.f.Close()
		if err := os.Remove(sp.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("spool: remove spare segment: %w", err))
		}
	}
	l.res.spares = nil
	return errors.Join(errs...)
}

// refused logs, at most once a second, that appends were refused for lack
// of space.
func (l *Log) refused(err error, records int) {
	r := &l.res
	r.refused += records
	if now := time.Now(); now.Sub(r.logged) >= time.Second {
		l.log.Error("append refused: no space left on device", "records", r.refused, "err", err)
		r.refused, r.logged = 0, now
	}
}
