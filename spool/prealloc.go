package spool

import (
	"fmt"
	"os"
)

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

type fillJob struct {
	f        *os.File
	from, to int64
	err      error
}

// waitFill waits for the background zero-fill, if one runs (writer only).
func (l *Log) waitFill() error {
	if !l.filling {
		return nil
	}
	j := <-l.fillRes
	l.filling = false
	if j.err != nil {
		return j.err
	}
	l.alloc = max(l.alloc, j.to)
	return nil
}

// filler zero-fills preallocated space for the writer.
func (l *Log) filler() {
	defer l.wg.Done()
	for j := range l.fillCh {
		j.err = writeZeros(j.f, j.from, j.to)
		if j.err == nil {
			// Put the zeros on disk now, so that the syncer's fdatasync has
			// only the data to write.
			j.err = fdatasync(j.f)
		}
		l.fillRes <- j
	}
}
