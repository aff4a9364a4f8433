//go:build !unix

package bench

import "time"

// cpuTime returns 0: unknown on this system.
func cpuTime() time.Duration { return 0 }
