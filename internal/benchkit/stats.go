// Package benchkit is the measuring harness that every FastMQ benchmark
// shares, `fastmq bench` and the comparisons with other systems in
// benchcmp/ alike, so that a ratio such as FastMQ/JetStream rests on both
// sides being measured the same way: the statistics (Median, Percentile,
// SpreadOf), the machine's noise during a run (ReadCPU and CPUTimes.Noise
// for the CPU time the hypervisor stole and I/O waits took, LoadAvg,
// IOCalls), the order of alternating rounds (Alternate), and child
// processes that measure and report (StartChild, Ready, WaitForStop).
//
// Its functions are safe for concurrent use; none keeps what it is given.
// It depends on the standard library only.
package benchkit

import (
	"cmp"
	"fmt"
	"slices"
)

// Median returns the median of v: the middle value, or the mean of the two
// middle ones when v has an even length; 0 for an empty v. v is not
// modified.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[n/2]
}

// Percentile returns the p-quantile (p from 0 to 1) of sorted, which must
// be sorted in increasing order: the element at index ⌊p·(n−1)⌋, so p=0
// is the least, p=1 the greatest; the zero value for an empty slice.
func Percentile[T cmp.Ordered](sorted []T, p float64) T {
	if len(sorted) == 0 {
		var zero T
		return zero
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Spread is the median of a figure over rounds, with its least and
// greatest value.
type Spread struct {
	Median, Min, Max float64
}

// SpreadOf returns the spread of v (the zero Spread for an empty v).
func SpreadOf(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	return Spread{Median: Median(v), Min: slices.Min(v), Max: slices.Max(v)}
}

// String renders s with two decimals as "median (min MIN, max MAX)".
func (s Spread) String() string {
	return fmt.Sprintf("%.2f (min %.2f, max %.2f)", s.Median, s.Min, s.Max)
}

// Alternate returns the order in which round (from 0) runs impls: as
// given in even rounds, reversed in odd ones, so that over an even number
// of rounds each runs as often first as last, on a machine that warms up
// or slows down alike. impls is not modified.
func Alternate[T any](impls []T, round int) []T {
	out := slices.Clone(impls)
	if round%2 == 1 {
		slices.Reverse(out)
	}
	return out
}
