package spool

import (
	"sync/atomic"
	"time"
)

// FsyncBuckets are the upper bounds of the fsync latency histogram
// (FsyncStats.Counts); the last count is of the fsyncs above the last
// bound.
var FsyncBuckets = [...]time.Duration{
	500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2500 * time.Millisecond,
}

// FsyncStats is the latency of a Log's group fsyncs (one observation per
// group commit, covering every segment it synced), as a histogram, and
// what they carried.
type FsyncStats struct {
	Counts [len(FsyncBuckets) + 1]uint64 `json:"counts"` // per bucket of FsyncBuckets, then above the last
	Count  uint64                        `json:"count"`  // fsyncs
	Sum    time.Duration                 `json:"sum_ns"`
	Max    time.Duration                 `json:"max_ns"`
	// Bytes are the stored batch bytes the fsyncs made durable.
	Bytes int64 `json:"bytes"`
	// ZeroBytes are the preallocated zeros the writer wrote ahead of the
	// data, which the fsyncs put on disk with it; MaxZeroBytes is the most
	// written between two fsyncs (at most one preallocation step: zeros
	// never reach the disk in large runs that an fsync would wait for).
	ZeroBytes    int64 `json:"zero_bytes"`
	MaxZeroBytes int64 `json:"max_zero_bytes"`
}

// fsyncStats counts fsync latencies with atomics only: the syncer
// observes, Stats reads.
type fsyncStats struct {
	counts [len(FsyncBuckets) + 1]atomic.Uint64
	sum    atomic.Int64
	max    atomic.Int64
	bytes  atomic.Int64
	zeros  atomic.Int64
	maxZ   atomic.Int64
}

// carried records what one fsync carried: bytes of batches and zeros of
// preallocation (syncer goroutine only).
func (s *fsyncStats) carried(bytes, zeros int64) {
	s.bytes.Add(bytes)
	s.zeros.Add(zeros)
	if zeros > s.maxZ.Load() {
		s.maxZ.Store(zeros) // one writer: no lost update
	}
}

// observe records one fsync of duration d (syncer goroutine only).
func (s *fsyncStats) observe(d time.Duration) {
	i := 0
	for i < len(FsyncBuckets) && d > FsyncBuckets[i] {
		i++
	}
	s.counts[i].Add(1)
	s.sum.Add(int64(d))
	if int64(d) > s.max.Load() {
		s.max.Store(int64(d)) // one writer: no lost update
	}
}

func (s *fsyncStats) snapshot() FsyncStats {
	var st FsyncStats
	for i := range s.counts {
		st.Counts[i] = s.counts[i].Load()
		st.Count += st.Counts[i]
	}
	st.Sum, st.Max = time.Duration(s.sum.Load()), time.Duration(s.max.Load())
	st.Bytes, st.ZeroBytes, st.MaxZeroBytes = s.bytes.Load(), s.zeros.Load(), s.maxZ.Load()
	return st
}

// FsyncStats returns the latency of the log's group fsyncs since Open (as
// Stats().Fsyncs, without Stats' walk over the index).
func (l *Log) FsyncStats() FsyncStats { return l.fsyncs.snapshot() }
