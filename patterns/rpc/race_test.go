//go:build race

package rpc_test

// raceEnabled: the race detector is on (sync.Pool then drops items at
// random, so allocation counts do not hold).
const raceEnabled = true
