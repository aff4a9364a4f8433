package benchkit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CPUTimes is the machine's CPU time, from the first line of Linux's
// /proc/stat, in clock ticks: all of it, and the parts spent idle, waiting
// for I/O and stolen by the hypervisor.
type CPUTimes struct {
	Total, Idle, IOWait, Steal uint64
}

// ReadCPU reads the machine's CPU time; the zero CPUTimes where
// /proc/stat is missing or unreadable.
func ReadCPU() CPUTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}
	}
	return parseCPU(string(b))
}

// parseCPU parses /proc/stat's text: its "cpu" line's fields user, nice,
// system, idle, iowait, irq, softirq and steal (guest time is counted in
// user already, so the fields after steal are left out of the total).
func parseCPU(stat string) CPUTimes {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return CPUTimes{}
	}
	var t CPUTimes
	for i, s := range f[1:9] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return CPUTimes{}
		}
		t.Total += v
		switch i {
		case 3:
			t.Idle = v
		case 4:
			t.IOWait = v
		case 7:
			t.Steal = v
		}
	}
	return t
}

// Share is how the machine's CPU time went between two readings, in
// percent of it.
type Share struct {
	Steal, IOWait, Idle float64
}

// Since returns how the CPU time went from the earlier reading a to t; ok
// is false when no time passed or a reading is missing.
func (t CPUTimes) Since(a CPUTimes) (s Share, ok bool) {
	if t.Total <= a.Total {
		return Share{}, false
	}
	d := float64(t.Total - a.Total)
	return Share{
		Steal:  100 * float64(t.Steal-a.Steal) / d,
		IOWait: 100 * float64(t.IOWait-a.IOWait) / d,
		Idle:   100 * float64(t.Idle-a.Idle) / d,
	}, true
}

// Noise says how the machine's CPU time went from the earlier reading a
// to t, as "  (steal S %, iowait W %, idle I %)": the shares the
// hypervisor stole and I/O waits took make a run noisy on a virtual
// machine. It is "" when Since is not ok.
func (t CPUTimes) Noise(a CPUTimes) string {
	s, ok := t.Since(a)
	if !ok {
		return ""
	}
	return fmt.Sprintf("  (steal %.1f %%, iowait %.1f %%, idle %.0f %%)", s.Steal, s.IOWait, s.Idle)
}

// LoadAvg returns the 1, 5 and 15-minute load averages from Linux's
// /proc/loadavg, as "L1 L5 L15"; "unknown" where it is missing.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// IOCalls returns the read and write system calls (of every kind: read,
// readv, write, writev...) this process made so far, from Linux's
// /proc/self/io; 0 where that is not available. A run's difference,
// divided by its operations, is what one cost in system calls that move
// data (polling and futexes are not counted).
func IOCalls() uint64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	return parseIOCalls(string(b))
}

func parseIOCalls(io string) uint64 {
	var n uint64
	for line := range strings.SplitSeq(io, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if ok && (k == "syscr" || k == "syscw") {
			x, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			n += x
		}
	}
	return n
}
