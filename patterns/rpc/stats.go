package rpc

import (
	"encoding/json"
	"sync/atomic"
	"time"
)

// LatencyBuckets are the upper bounds of Histogram's buckets; the last
// bucket, Counts[len(LatencyBuckets)], holds everything slower.
var LatencyBuckets = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second,
}

// Histogram counts latencies in LatencyBuckets (not cumulative).
type Histogram struct {
	Counts [len(LatencyBuckets) + 1]uint64 `json:"counts"`
	Sum    time.Duration                   `json:"sum_ns"`
}

// MarshalJSON writes the histogram with its buckets' upper bounds,
// le_ns (the last count is of the observations above the last bound), so
// that /status can be read without the source at hand.
func (h Histogram) MarshalJSON() ([]byte, error) {
	type plain Histogram
	return json.Marshal(struct {
		plain
		Bounds *[len(LatencyBuckets)]time.Duration `json:"le_ns"`
	}{plain(h), &LatencyBuckets})
}

// Count returns the number of observations.
func (h Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

func bucket(d time.Duration) int {
	for i, b := range LatencyBuckets {
		if d <= b {
			return i
		}
	}
	return len(LatencyBuckets)
}

func (h *Histogram) observe(d time.Duration) {
	h.Counts[bucket(d)]++
	h.Sum += d
}

// histogramAtomic is a Histogram updated without a lock.
type histogramAtomic struct {
	counts [len(LatencyBuckets) + 1]atomic.Uint64
	sum    atomic.Int64
}

func (h *histogramAtomic) observe(d time.Duration) {
	h.counts[bucket(d)].Add(1)
	h.sum.Add(int64(d))
}

func (h *histogramAtomic) snapshot() Histogram {
	var s Histogram
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
	}
	s.Sum = time.Duration(h.sum.Load())
	return s
}
