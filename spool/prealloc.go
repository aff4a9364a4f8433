package spool

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
)

// preallocChunk is how much zero-filled space the preallocator keeps ahead
// of the data, at most.
const preallocChunk = 4 << 20

// largeSyncBytes: fsyncs that carry more than this on average are not helped
// by preallocated space.
const largeSyncBytes = 512 << 10

var zeroBuf = make([]byte, 256<<10)

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
// growing the file, which saves a journal commit per fsync. It zero-fills
// the next chunk in a goroutine of its own while the writer writes below it,
// as etcd's file pipeline prepares the next WAL file.
//
// Preallocation pays only while fsyncs carry little data: the syncer reports
// each fsync's size (observe) and the preallocator stops zero-filling while
// they are large, when writing the zeros costs more than it saves.
//
// Preallocation is never what makes a write fail: when the disk has no room
// for the zeros, the zeros written are cut off again and the segment goes
// on without preallocation, so that the data takes the space that is left.
//
// The writer goroutine owns it and calls every method but observe, which
// the syncer calls. Close stops its goroutine.
type preallocator struct {
	limit int64 // the segment size: nothing is zero-filled past it

	// writer only
	f       *os.File // the active segment
	alloc   int64    // end of the zero-filled part of f
	filling bool     // a fill job is running
	full    bool     // the disk had no room for zeros in f: do not preallocate in it

	started bool
	jobs    chan fillJob
	results chan fillJob
	done    chan struct{} // closed when the goroutine has exited

	small   atomic.Bool // fsyncs carry little data: preallocate
	syncAvg int64       // syncer only: moving average of bytes per fsync
}

type fillJob struct {
	f        *os.File
	from, to int64
	err      error
}

// newPreallocator returns a preallocator for segments of at most limit
// bytes; on says whether to preallocate until the first fsync is observed.
func newPreallocator(limit int64, on bool) *preallocator {
	p := &preallocator{limit: limit, jobs: make(chan fillJob), results: make(chan fillJob, 1), done: make(chan struct{})}
	p.small.Store(on)
	return p
}

// start starts the goroutine that zero-fills in the background.
func (p *preallocator) start() {
	p.started = true
	go p.run()
}

func (p *preallocator) run() {
	defer close(p.done)
	for j := range p.jobs {
		j.err = writeZeros(j.f, j.from, j.to)
		if j.err == nil {
			// Put the zeros on disk now, so that the syncer's fdatasync has
			// only the data to write.
			j.err = fdatasync(j.f)
		}
		p.results <- j
	}
}

// Close waits for a running fill and stops the goroutine. It returns the
// error of that fill.
func (p *preallocator) Close() error {
	err := p.wait()
	if p.started {
		close(p.jobs)
		<-p.done
		p.started = false
	}
	return err
}

// observe records the size of an fsync (syncer only).
func (p *preallocator) observe(bytes int64) {
	p.syncAvg += (bytes - p.syncAvg) / 8
	p.small.Store(p.syncAvg < largeSyncBytes)
}

// prepare zero-fills a new segment file past its header, when preallocation
// pays, and returns the end of the zeros.
func (p *preallocator) prepare(f *os.File) (int64, error) {
	alloc := int64(segHeaderLen)
	if p.small.Load() {
		alloc = max(alloc, min(p.limit, preallocChunk))
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
	p.f, p.alloc, p.full = f, alloc, false
}

// reserve readies [pos, end) of the file for a write: it waits for a running
// fill that covers it and, when preallocation pays, zero-fills ahead now.
func (p *preallocator) reserve(end int64) error {
	if end > p.alloc {
		if err := p.wait(); err != nil {
			return err
		}
	}
	if end > p.alloc && p.small.Load() && !p.full {
		// Keep zero-filled space ahead of the data: fdatasync of blocks that
		// already exist does not wait for a journal commit.
		na := max(end, min(p.alloc+preallocChunk, p.limit))
		if err := writeZeros(p.f, end, na); err != nil {
			return p.noRoom(err, p.alloc)
		}
		p.alloc = max(na, end)
	}
	return nil
}

// noRoom handles a failed zero-fill that began at or after from, the end of
// the data or of the zeros before it: a full disk stops preallocation in
// this file and cuts the zeros written at from, so that the data gets the
// space; any other error is returned.
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

// wrote says the data now ends at pos; when the zeros ahead run low it
// zero-fills the next chunk in the background while the writer writes below it.
func (p *preallocator) wrote(pos int64) {
	p.alloc = max(p.alloc, pos)
	if p.small.Load() && !p.filling && !p.full && p.alloc-pos < preallocChunk/2 && p.alloc < p.limit {
		p.filling = true
		p.jobs <- fillJob{f: p.f, from: p.alloc, to: min(p.alloc+preallocChunk, p.limit)}
	}
}

// wait waits for the background zero-fill, if one runs.
func (p *preallocator) wait() error {
	if !p.filling {
		return nil
	}
	j := <-p.results
	p.filling = false
	if j.err != nil {
		return p.noRoom(j.err, j.from) // the writer writes nothing past j.from while the fill runs
	}
	p.alloc = max(p.alloc, j.to)
	return nil
}

// trim waits for a running fill and reports whether zeros lie past pos; the
// caller then truncates the file to pos and calls reset.
func (p *preallocator) trim(pos int64) (bool, error) {
	if err := p.wait(); err != nil {
		return false, err
	}
	return p.alloc > pos, nil
}
