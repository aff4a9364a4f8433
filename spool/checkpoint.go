package spool

import "time"

// checkpointInterval is the least time between two background writes of
// the recovery checkpoint.
const checkpointInterval = time.Second

// checkpointer raises the recovery checkpoint in meta.json to the
// acknowledged end of the log, at most once per checkpointInterval, after
// the syncer signals new acknowledged records on ckptCh. It runs beside the
// syncer, never on the Append path, and stops on stopCh (Close writes the
// last checkpoint once the writer and syncer have exited).
func (l *Log) checkpointer() {
	defer l.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-l.stopCh:
			return
		case <-l.ckptCh:
		}
		if err := l.checkpoint(false); err != nil {
			l.log.Warn("recovery checkpoint not written", "err", err)
		}
		timer.Reset(checkpointInterval)
		select {
		case <-l.stopCh:
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// signalCheckpoint tells the checkpointer that records were acknowledged
// (syncer; never blocks).
func (l *Log) signalCheckpoint() {
	select {
	case l.ckptCh <- struct{}{}:
	default:
	}
}

// checkpoint writes the acknowledged end of the log (l.acked: NextOffset,
// except that under Config.VisibleBeforeSync records are published before
// they are acknowledged) as the recovery checkpoint, if it moved. closed
// (Close, after the last fsync) also marks the log cleanly closed.
func (l *Log) checkpoint(closed bool) error {
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	// The deduplication state goes first, covering exactly the records
	// below the checkpoint, so that Open needs to scan only after it.
	l.ddMu.Lock()
	n := l.acked
	var df *dedupFile
	if l.durable.dirty {
		f := l.durable.snapshot(n)
		df = &f
		l.durable.dirty = false
	}
	l.ddMu.Unlock()
	if df != nil {
		if err := writeDedup(l.cfg.Dir, *df); err != nil {
			l.ddMu.Lock()
			l.durable.dirty = true
			l.ddMu.Unlock()
			return err
		}
	}
	if n == l.meta.Acked && !closed {
		return nil
	}
	m := l.meta
	m.Acked = n
	m.Open = m.Open && !closed
	if err := writeMeta(l.cfg.Dir, m); err != nil {
		return err
	}
	l.meta = m
	return nil
}
