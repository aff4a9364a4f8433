//go:build unix

// Package cpuclock reads the CPU time a process has used, for benchmarks
// that report CPU per operation.
package cpuclock

import (
	"syscall"
	"time"
)

// Process returns the CPU time (user and system) this process has used so
// far, 0 when unknown.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
