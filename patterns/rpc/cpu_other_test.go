//go:build !unix

package rpc_test

import "time"

// cpuTime returns 0: not measured here.
func cpuTime() time.Duration { return 0 }
