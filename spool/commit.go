package spool

import (
	"os"
	"runtime"
	"sync"
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
	records int32 // beside force: the struct stays in its 80-byte size class
	force   bool
	// published: the writer published the group before its fsync
	// (Config.VisibleBeforeSync); the syncer only acknowledges it.
	published bool
	err       error

	dd *pwDedup // deduplication events for the durable view (dedupfile.go); nil for none
}

// syncQueue hands written groups from the writer to the syncer. The writer
// does not wait for the syncer's fsync: records written while an fsync
// stalls (tens to hundreds of milliseconds on some disks) stay readable
// through ReadWritten, and appends keep being written behind it. It waits
// only once maxUnsyncedGroups groups are written and not yet committed
// (their record values are dropped once written, so what a queued group
// holds is small; the kernel throttles the dirty pages themselves).
type syncQueue struct {
	mu      sync.Mutex
	q       []*pendingWrite // written, not yet taken by the syncer
	pending int             // groups put and not yet committed
	closed  bool            // the writer has exited
	more    chan struct{}   // (1) the writer put a group or exited
	room    chan struct{}   // (1) the syncer committed groups
}

// maxUnsyncedGroups bounds the groups written and not yet committed: at
// 10 K single-record appends/s, 1.6 s of stalled fsync.
const maxUnsyncedGroups = 1 << 14

func (q *syncQueue) init() {
	q.more = make(chan struct{}, 1)
	q.room = make(chan struct{}, 1)
}

// put queues a written group for the syncer (writer), first waiting while
// maxUnsyncedGroups are pending.
func (q *syncQueue) put(pw *pendingWrite) {
	q.mu.Lock()
	for q.pending >= maxUnsyncedGroups {
		q.mu.Unlock()
		<-q.room
		q.mu.Lock()
	}
	q.q = append(q.q, pw)
	q.pending++
	q.mu.Unlock()
	signal(q.more)
}

// close says the writer has exited: nothing more comes (writer).
func (q *syncQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	signal(q.more)
}

// take appends every queued group to batch (syncer). It reports false
// once the writer has exited and nothing more can come.
func (q *syncQueue) take(batch []*pendingWrite) ([]*pendingWrite, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	batch = append(batch, q.q...)
	clear(q.q)
	q.q = shrink(q.q[:0])
	return batch, !q.closed
}

// done releases n committed groups' places (syncer).
func (q *syncQueue) done(n int) {
	q.mu.Lock()
	q.pending -= n
	q.mu.Unlock()
	signal(q.room)
}

// shrink drops an empty queue's array if a stall grew it large: a node
// has many streams, and a stall's backlog is rare.
func shrink(q []*pendingWrite) []*pendingWrite {
	if cap(q) > 1024 {
		return nil
	}
	return q
}

// signal wakes the one goroutine waiting on c, if any; a wake-up given
// while none waits is kept for the next wait.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// syncer fsyncs written groups according to the policy, publishes them to
// readers and acknowledges the appends. One fsync covers every group written
// by the time it starts; under SyncGroup it waits up to GroupInterval for
// GroupRecords records first.
func (l *Log) syncer() {
	defer l.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var batch []*pendingWrite
	var records int
	var force bool
	var lastSync time.Time // start of the last group fsync, for MinSyncInterval
	open := true
	// drain takes the groups already written, without waiting; open turns
	// false once the writer has exited.
	drain := func() {
		n := len(batch)
		batch, open = l.sq.take(batch)
		for _, p := range batch[n:] {
			records += int(p.records)
			force = force || p.force
		}
	}
	// gather takes the groups written within d, until GroupRecords
	// records wait, a group forces the fsync or the writer exits.
	gather := func(d time.Duration) {
		timer.Reset(d)
		defer timer.Stop()
		for records < l.cfg.GroupRecords && !force && open {
			select {
			case <-l.sq.more:
				drain()
			case <-timer.C:
				return
			}
		}
	}
	for open {
		batch, records, force = batch[:0], 0, false
		for drain(); len(batch) == 0; drain() { // wait for the first group
			if !open {
				return
			}
			<-l.sq.more
		}
		if l.cfg.Sync == SyncGroup && l.cfg.GroupInterval > 0 && !force && open && records < l.cfg.GroupRecords {
			gather(l.cfg.GroupInterval)
		}
		if l.cfg.Sync == SyncGroup && l.cfg.MinSyncInterval > 0 && !force && open && records < l.cfg.GroupRecords {
			if d := time.Until(lastSync.Add(l.cfg.MinSyncInterval)); d >= exactWait {
				gather(d)
			} else if d > 0 {
				sleepExact(d)
				drain()
			}
		}
		doSync := force || l.cfg.Sync != SyncNone
		if doSync {
			lastSync = time.Now()
		}
		l.commit(batch, doSync)
		l.sq.done(len(batch))
		clear(batch) // the committed groups are garbage now
		batch = shrink(batch)
		// Let the goroutines the commit readied (callers of Append and
		// Ack.Wait, readers waiting for records) run before the next
		// fsync: the runtime queues them on this goroutine's P, and takes
		// a P back from a goroutine blocked in a system call only when
		// sysmon next looks, which on a quiet process can be milliseconds
		// away. Without the yield they waited behind the next fdatasync:
		// at 10 K appends/s an Append's caller woke 50 µs after its
		// acknowledgement at the median (0.3-0.7 ms at p99); with it,
		// 4 µs (0.1 ms).
		runtime.Gosched()
	}
}

// exactWait: the syncer waits out a MinSyncInterval shorter than this in
// the kernel (sleepExact) instead of on a runtime timer, which on an
// otherwise idle process fires up to a millisecond late (the runtime's
// network poller, which sleeps for it, counts in milliseconds and rounds
// up): 500 µs became more than 1 ms. A Sync or a full group that comes
// during such a wait waits for its end.
const exactWait = 2 * time.Millisecond

// slowFsync: fsyncs that take longer are logged.
const slowFsync = 500 * time.Millisecond

// commit fsyncs (if doSync) the segments written by batch, publishes the
// batches and acknowledges the appends.
func (l *Log) commit(batch []*pendingWrite, doSync bool) {
	var err error
	if doSync {
		if l.beforeSync != nil {
			l.beforeSync()
		}
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
		l.fsyncs.carried(bytes, l.pre.takeZeros())
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
		if err == nil {
			l.fsyncs.observe(time.Since(t0))
		}
		if err != nil {
			l.fail(err)
		}
	}
	if err == nil {
		dedup, end, acked := false, uint64(0), false
		for _, pw := range batch {
			dedup = dedup || pw.dd != nil
			if pw.err != nil {
				continue
			}
			for _, c := range pw.chunks {
				if len(c.batches) > 0 {
					end, acked = c.batches[len(c.batches)-1].end(), true
				}
			}
		}
		// The durable view, the acknowledged end and the published end
		// move together, for the checkpointer (under VisibleBeforeSync the
		// published end may be ahead of the other two).
		l.ddMu.Lock()
		if dedup {
			l.applyDurable(batch)
		}
		l.publish(batch)
		if acked {
			l.acked = end
		}
		l.ddMu.Unlock()
		l.signalCheckpoint()
	} else {
		l.dropWritten() // never to be published
	}
	for _, pw := range batch {
		e := pw.err
		if e == nil {
			e = err
		}
		for _, r := range pw.reqs {
			r.err = e
			if e == nil && r.dd != nil && r.dd.err != nil {
				r.err = r.dd.err
			}
			if e == nil && r.raw != nil && r.raw.err != nil {
				r.err = r.raw.err
			}
			close(r.done)
		}
	}
}

func (l *Log) activeFile() *os.File {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.segs[len(l.segs)-1].f
}

// publish makes the batches of every group that was written without error,
// and not published by the writer already, visible to readers and wakes
// those waiting.
func (l *Log) publish(batch []*pendingWrite) {
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := false
	for _, pw := range batch {
		if pw.err == nil && !pw.published {
			changed = l.publishLocked(pw) || changed
		}
	}
	l.unnoteLocked(batch)
	if changed {
		l.wakeLocked()
	}
}

// publishEarly publishes a group the writer has just written, before its
// fsync (Config.VisibleBeforeSync; writer).
func (l *Log) publishEarly(pw *pendingWrite) {
	l.mu.Lock()
	if l.publishLocked(pw) {
		l.wakeLocked()
	}
	l.mu.Unlock()
	pw.published = true
}

// publishLocked adds the batches of pw to the index (l.mu held) and
// reports whether it added any.
func (l *Log) publishLocked(pw *pendingWrite) bool {
	changed := false
	for _, c := range pw.chunks {
		l.addBatches(c.seg, c.batches)
		c.seg.size = c.endPos
		changed = changed || len(c.batches) > 0
	}
	return changed
}
