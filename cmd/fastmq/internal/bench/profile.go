package bench

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// cpuProfile starts writing a CPU profile to path (nothing when path is
// empty) and returns what stops it and closes the file.
func cpuProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// memProfile writes the allocation profile (allocs) to path, if not
// empty; a failure is printed, as the run's figures are what matters.
func memProfile(path string) {
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "memprofile:", err)
	}
}
