package discovery

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

// serf.Shutdown stops the network listeners and signals serf's and
// memberlist's other goroutines (probe, gossip and push/pull schedulers,
// packet and stream handlers, reaper, reconnector, queue-depth monitors) but
// does not wait for them. So that Close really returns after everything this
// node started has ended, waitGossipExit polls the goroutine dump until no
// goroutine is running a method of this node's *serf.Serf or
// *memberlist.Memberlist (tracebacks print the receiver pointer). A probe
// blocked on its ack timeout ends within the probe interval scaled by
// memberlist's awareness; a stream handler within the TCP timeout.
// Goroutines whose frames do not show the pointers (short timer closures)
// are not tracked; they end within a probe timeout.
func waitGossipExit(ptrs []string, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	buf := make([]byte, 64<<10)
	for {
		var n int
		for {
			n = runtime.Stack(buf, true)
			if n < len(buf) {
				break
			}
			buf = make([]byte, 2*len(buf))
		}
		left := countMatching(string(buf[:n]), ptrs)
		if left == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a bound
	}
}

func countMatching(dump string, ptrs []string) int {
	count := 0
	for g := range strings.SplitSeq(dump, "\n\n") {
		if !strings.Contains(g, "github.com/hashicorp/") {
			continue
		}
		for _, p := range ptrs {
			if containsWord(g, p) {
				count++
				break
			}
		}
	}
	return count
}

// containsWord reports whether s contains hex pointer p not followed by
// another hex digit.
func containsWord(s, p string) bool {
	for {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		j := i + len(p)
		if j == len(s) || !isHex(s[j]) {
			return true
		}
		s = s[j:]
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f'
}

func pointerText(p any) string { return fmt.Sprintf("%p", p) }
