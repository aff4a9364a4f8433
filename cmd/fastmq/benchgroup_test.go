package main

import (
	"strings"
	"testing"
)

// TestCLIBenchGroup runs bench group with small counts: a publisher and
// three member processes, as fast as possible and at a rate; every record
// is acknowledged (the run ends only then) and the figures are printed.
func TestCLIBenchGroup(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--count", "3000"},
		{"--count", "500", "--rate", "1000", "--members", "2"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			p := startCLI(t, append([]string{"bench", "group"}, args...)...)
			p.closeStdin()
			out := strings.Join(p.mustSucceed(), "\n")
			if !strings.Contains(out, " acked records/s") {
				t.Fatalf("bench group printed %q", out)
			}
			if len(args) > 2 && !strings.Contains(out, "append-to-delivery latency at 1000 records/s: p50 ") {
				t.Fatalf("bench group --rate printed no latency: %q", out)
			}
		})
	}
}

// TestCLIBenchGroupBadFlags: a negative --member-procs is refused naming
// the flag.
func TestCLIBenchGroupBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--member-procs", "-1"}} {
		p := startCLI(t, append([]string{"bench", "group"}, args...)...)
		p.closeStdin()
		p.mustFail(args[0])
	}
}
