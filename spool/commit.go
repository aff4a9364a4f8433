package spool

import (
	"os"
	"time"
)

type segChunk struct {
	seg     *segment
	batches []batchIdx
	endPos  int64
}

type pendingWrite struct {
	chunks  []segChunk
	reqs    []*Ack
	records int
	force   bool
	err     error
}

// syncer fsyncs written groups according to the policy, publishes them to
// readers and acknowledges the appends.
func (l *Log) syncer() {
	defer l.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var batch []*pendingWrite
	for {
		pw, ok := <-l.syncCh
		if !ok {
			return
		}
		batch = append(batch[:0], pw)
		records := pw.records
		force := pw.force
		open := true
		// Take whatever else is already written.
	more:
		for {
			select {
			case p, ok := <-l.syncCh:
				if !ok {
					open = false
					break more
				}
				batch = append(batch, p)
				records += p.records
				force = force || p.force
			default:
				break more
			}
		}
		if l.cfg.Sync == SyncGroup && l.cfg.GroupInterval > 0 && !force && open && records < l.cfg.GroupRecords {
			timer.Reset(l.cfg.GroupInterval)
		wait:
			for records < l.cfg.GroupRecords && !force {
				select {
				case p, ok := <-l.syncCh:
					if !ok {
						open = false
						break wait
					}
					batch = append(batch, p)
					records += p.records
					force = force || p.force
				case <-timer.C:
					break wait
				}
			}
			timer.Stop()
		}
		l.commit(batch, force || l.cfg.Sync != SyncNone)
		if !open {
			return
		}
	}
}

// slowFsync: fsyncs that take longer are logged.
const slowFsync = 500 * time.Millisecond

// commit fsyncs (if doSync) the segments written by batch, publishes the
// batches and acknowledges the appends.
func (l *Log) commit(batch []*pendingWrite, doSync bool) {
	var err error
	if doSync {
		// After a failed write or fsync nothing more is acknowledged: the
		// groups written before the failure was known were never synced.
		err = l.failure()
	}
	if doSync && err == nil {
		var bytes int64
		for _, pw := range batch {
			for _, c := range pw.chunks {
				for _, b := range c.batches {
					bytes += int64(b.size)
				}
			}
		}
		l.pre.observe(bytes)
		t0 := time.Now()
		defer func() {
			if d := time.Since(t0); d > slowFsync && err == nil {
				l.log.Warn("slow fsync", "duration", d, "bytes", bytes)
			}
		}()
		var last *segment
	syncs:
		for _, pw := range batch {
			for _, c := range pw.chunks {
				if c.seg != last {
					if err = fdatasync(c.seg.f); err != nil {
						break syncs
					}
					last = c.seg
				}
			}
		}
		if last == nil && err == nil {
			err = fdatasync(l.activeFile())
		}
		if err != nil {
			l.fail(err)
		}
	}
	if err == nil {
		l.publish(batch)
	}
	for _, pw := range batch {
		e := pw.err
		if e == nil {
			e = err
		}
		for _, r := range pw.reqs {
			r.err = e
			close(r.done)
		}
	}
}

func (l *Log) activeFile() *os.File {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.segs[len(l.segs)-1].f
}

// publish makes the batches of every group that was written without error
// visible to readers and wakes those waiting.
func (l *Log) publish(batch []*pendingWrite) {
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := false
	for _, pw := range batch {
		if pw.err != nil {
			continue
		}
		for _, c := range pw.chunks {
			l.addBatches(c.seg, c.batches)
			c.seg.size = c.endPos
			changed = changed || len(c.batches) > 0
		}
	}
	if changed {
		l.wakeLocked()
	}
}
