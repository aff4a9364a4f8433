package testutil

import (
	"bytes"
	"strings"
	"sync"
)

// LogBuffer is a log sink safe for concurrent writes: a node's logger
// writes to it while the test reads it.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Count returns how many times sub occurs in what was written.
func (l *LogBuffer) Count(sub string) int {
	return strings.Count(l.String(), sub)
}
