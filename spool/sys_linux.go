package spool

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// startWatch starts the inotify watch that wakes Wait on a read-only Log.
func (l *Log) startWatch() error {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("spool: inotify: %w", err)
	}
	mask := uint32(syscall.IN_MODIFY | syscall.IN_CREATE | syscall.IN_MOVED_TO | syscall.IN_DELETE | syscall.IN_CLOSE_WRITE)
	if _, err := syscall.InotifyAddWatch(fd, l.cfg.Dir, mask); err != nil {
		syscall.Close(fd)
		return fmt.Errorf("spool: inotify watch: %w", err)
	}
	l.watch = os.NewFile(uintptr(fd), "inotify")
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		buf := make([]byte, 64<<10)
		for {
			if _, err := l.watch.Read(buf); err != nil {
				return // closed
			}
			if err := l.refresh(); err != nil {
				l.log.Debug("refresh failed", "err", err)
			}
		}
	}()
	return nil
}

// sleepExact sleeps for d in the kernel (nanosleep, to the microsecond),
// not on a runtime timer: the syncer's short pacing waits (exactWait).
func sleepExact(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}

// fallocateKeepSize allocates [off, off+n) of f without changing its size
// (FALLOC_FL_KEEP_SIZE): the blocks exist, so writing there later cannot
// fail for lack of space.
func fallocateKeepSize(f *os.File, off, n int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), 1 /* FALLOC_FL_KEEP_SIZE */, off, n)
		if err != syscall.EINTR {
			return err
		}
	}
}
