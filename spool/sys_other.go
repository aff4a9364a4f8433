//go:build unix && !linux

package spool

import (
	"errors"
	"os"
	"time"
)

// startWatch, where inotify is missing, refreshes a read-only Log every
// 100ms while it is open (the only polling in the package).
func (l *Log) startWatch() error {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-l.roStop:
				return
			case <-t.C:
				if err := l.refresh(); err != nil {
					l.log.Debug("refresh failed", "err", err)
				}
			}
		}
	}()
	return nil
}

// sleepExact sleeps for d; where the runtime gives no better, on a timer.
func sleepExact(d time.Duration) { time.Sleep(d) }

// fallocateKeepSize is not available here: space is not reserved ahead of
// the writer.
func fallocateKeepSize(f *os.File, off, n int64) error { return errors.ErrUnsupported }
