package bench

import (
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
