package spool

import (
	"context"
)

// Reading what is written before it is durable. The writer hands every
// group it has written to the syncer, which publishes it to readers
// after its fdatasync. Until then the group is also noted here (l.early,
// in write order, and l.wend its end), so that a Reader that asked for it
// (ReadWritten) can read the records as soon as they are in the file:
// a consumer group's server leases records then, as a broker delivers
// what is in its page cache, and an fdatasync that stalls (a virtual
// disk's do, for tens of milliseconds at times) does not hold up
// delivery. Appends are still acknowledged only once durable, and every
// other reader still sees only published records. An OS crash can take
// written records that such a reader saw; the log then reopens in a new
// epoch at its durable end (a writer that did not close cleanly always
// starts one), which is how their readers learn of it.

// noteWritten notes a group the writer has just written, for the readers
// of the written end (writer; not under Config.VisibleBeforeSync, which
// publishes it instead).
func (l *Log) noteWritten(pw *pendingWrite) {
	end, ok := pw.end()
	if !ok {
		return // nothing written (every record a duplicate)
	}
	l.mu.Lock()
	if l.failure() != nil {
		// The syncer failed (and may have dropped the noted groups)
		// since this group was written: it will never be published.
		l.mu.Unlock()
		return
	}
	l.early = append(l.early, pw)
	l.wend = end
	if l.wwait.Swap(false) {
		// Someone waits (waitWritten set it under l.mu, so it is seen
		// here): a new channel only then, not for every group.
		close(l.wnotify)
		l.wnotify = make(chan struct{})
	}
	l.mu.Unlock()
}

// end returns the offset after the last record pw wrote.
func (pw *pendingWrite) end() (uint64, bool) {
	for i := len(pw.chunks) - 1; i >= 0; i-- {
		if bs := pw.chunks[i].batches; len(bs) > 0 {
			return bs[len(bs)-1].end(), true
		}
	}
	return 0, false
}

// unnoteLocked forgets the noted groups of batch, which the syncer has
// just published (l.mu held). Groups are published in the order they
// were noted.
func (l *Log) unnoteLocked(batch []*pendingWrite) {
	k := 0
	for _, pw := range batch {
		if k < len(l.early) && l.early[k] == pw {
			k++
		}
	}
	if k > 0 { // in place: the list keeps its one array
		n := copy(l.early, l.early[k:])
		clear(l.early[n:])
		l.early = l.early[:n]
	}
}

// dropWritten forgets every noted group: a write or fsync failed, so none
// of them will be published (syncer).
func (l *Log) dropWritten() {
	l.mu.Lock()
	if len(l.early) > 0 {
		clear(l.early)
		l.early = nil
		l.wend = l.next
		close(l.wnotify)
		l.wnotify = make(chan struct{})
	}
	l.mu.Unlock()
}

// writtenLocked is the offset after the last record written and not lost
// to a failure (l.mu held): NextOffset's, or beyond it the end of the
// groups written and not yet published.
func (l *Log) writtenLocked() uint64 {
	if len(l.early) > 0 {
		return max(l.next, l.wend)
	}
	return l.next
}

// WrittenOffset returns the offset after the last record written to the
// files: the records from NextOffset up to it are written and not yet
// durable (their fdatasync has not returned), and only a Reader that
// ReadWritten reads them. It is NextOffset on a read-only Log, under
// Config.VisibleBeforeSync and after a write failure.
func (l *Log) WrittenOffset() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.writtenLocked()
}

// WaitWritten is Wait for WrittenOffset: it returns once the record at
// offset is written, durable or not.
func (l *Log) WaitWritten(ctx context.Context, offset uint64) error {
	return l.waitWritten(ctx, offset, nil)
}

// waitWritten is WaitWritten that also returns ErrClosed when stop is
// closed.
func (l *Log) waitWritten(ctx context.Context, offset uint64, stop <-chan struct{}) error {
	if l.readOnly {
		return l.wait(ctx, offset, stop)
	}
	for {
		l.mu.RLock()
		if l.closed {
			l.mu.RUnlock()
			return ErrClosed
		}
		if l.writtenLocked() > offset {
			l.mu.RUnlock()
			return nil
		}
		ch, pub := l.wnotify, l.notify
		l.wwait.Store(true) // under l.mu: the next noteWritten sees it
		l.mu.RUnlock()
		select {
		case <-ch:
		case <-pub: // published (Config.VisibleBeforeSync, or a noted group)
		case <-ctx.Done():
			return ctx.Err()
		case <-l.closeCh:
			return ErrClosed
		case <-stop:
			return ErrClosed
		}
	}
}

// readWritten is readRaw up to WrittenOffset: below NextOffset it is
// readRaw; above, it reads the batches of one noted group's segment
// chunk (at least one batch, then up to maxBytes).
func (l *Log) readWritten(buf []byte, from uint64, maxBytes int) ([]byte, uint64, error) {
	l.mu.RLock()
	if l.closed || from < l.next || from >= l.writtenLocked() {
		l.mu.RUnlock()
		return l.readRaw(buf, from, maxBytes)
	}
	defer l.mu.RUnlock()
	for _, pw := range l.early {
		for _, c := range pw.chunks {
			bs := c.batches
			if len(bs) == 0 || bs[len(bs)-1].end() <= from {
				continue
			}
			return readBatches(buf, c.seg, bs, from, maxBytes)
		}
	}
	// Not reached: the noted groups cover [next, wend) without a gap.
	return nil, from, nil
}

// ReadWritten makes the Reader return records once they are written to
// the file, before their fdatasync (up to WrittenOffset rather than
// NextOffset): for a reader that must see records at once, such as a
// consumer group's server, and can live with the rare loss of records it
// saw. An OS crash (not a process crash: the OS still holds what was
// written) can take records that were written and not yet durable; their
// appends were never acknowledged, and the log reopens in a new epoch at
// its durable end, where new records take their offsets (see Epoch and
// EpochEnd). Call it before Next.
func (r *Reader) ReadWritten() { r.written = true }
