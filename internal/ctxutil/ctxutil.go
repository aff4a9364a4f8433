// Package ctxutil holds the small context helpers FastMQ's loops share.
package ctxutil

import (
	"context"
	"time"
)

// Sleep waits for d or until ctx ends, whichever comes first. It reports
// whether the whole duration passed (false: ctx ended first).
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
