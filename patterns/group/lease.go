package group

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"time"

	"github.com/fastmq/fastmq/patterns/group/internal/durable"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/spool"
)

// fetchLocked leases records to the member and replies, or parks the
// fetch until records are available or its wait ends. A wire.FlagStream fetch
// that took every record there was, with room for more, is answered
// wire.StatusOpen and parked for the rest (see leased.open). It unlocks s.mu.
func (s *Server) fetchLocked(g *state, l *spool.Log, env [][]byte, req wire.Request) {
	ld := s.leaseLocked(g, l, req, time.Now())
	parkable := req.WaitMillis > 0 && len(g.parked) < maxParked
	var old *parkedFetch
	switch {
	case ld.n == 0 && parkable:
		old = s.parkLocked(g, l, env, req)
	case ld.open && parkable:
		old = s.parkLocked(g, l, env, ld.rest)
		s.postLocked(env, wire.FetchReplyStatus(wire.StatusOpen, req.ID, ld.n, ld.data))
	default:
		s.postLocked(env, wire.FetchReply(req.ID, ld.n, ld.data))
	}
	if old != nil {
		s.postLocked(old.env, wire.EncodeReply(&wire.Reply{Status: wire.StatusOK, ID: old.req.ID}))
	}
	s.unlockAndSend()
}

// parkLocked parks a fetch until records are available or its wait ends.
// One parked fetch per member (two with wire.FlagPipeline): a newer one
// replaces the oldest, which it returns for the caller to answer empty,
// so a member that keeps fetching without waiting for replies holds one
// or two entries, not many.
func (s *Server) parkLocked(g *state, l *spool.Log, env [][]byte, req wire.Request) (old *parkedFetch) {
	limit := 1
	if req.Flags&wire.FlagPipeline != 0 {
		limit = 2
	}
	oldest, held := -1, 0
	for i, p := range g.parked {
		if p.req.Member == req.Member {
			if held++; oldest < 0 {
				oldest = i
			}
		}
	}
	if held >= limit {
		old = g.parked[oldest]
		g.parked = append(g.parked[:oldest], g.parked[oldest+1:]...)
	}
	wait := min(time.Duration(req.WaitMillis)*time.Millisecond, s.cfg.MaxWait)
	g.parked = append(g.parked, &parkedFetch{env: env, req: req, deadline: time.Now().Add(wait)})
	s.watchLocked(g.Stream, l)
	s.wakeAtLocked(time.Now().Add(wait))
	return old
}

// sendFrames sends a reply's frames.
func (s *Server) sendFrames(env [][]byte, frames [][]byte) {
	if err := s.cfg.Send.Send(env, frames); err != nil && s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("send reply failed", "err", err)
	}
}

// leased is what one leasing gave a fetch.
type leased struct {
	data [][]byte // the records, as a fetch reply's data frames
	n    uint32   // their count
	// open: a wire.FlagStream fetch that leased records, took every one
	// there was (no limit cut it: count, bytes or MaxAckPending) and
	// has a byte budget left stays open for rest (its count and bytes
	// less these). A fetch cut by a limit ends, so that its member asks
	// again at once, and its replies' bytes stay bounded as one
	// fetch's.
	open bool
	rest wire.Request
}

// leaseLocked leases up to the request's limits: due redeliveries first
// (lowest offset first), then records from the cursor. It returns the
// records as a fetch reply's data frames (one, or several with
// wire.FlagFrames), and their count.
func (s *Server) leaseLocked(g *state, l *spool.Log, req wire.Request, now time.Time) leased {
	n := int(req.MaxRecords)
	if n <= 0 {
		n = 1
	}
	n = min(n, maxFetchRecords)
	if room := s.maxAckPendingOf(req) - g.Held[req.Member]; n > room {
		n = room
	}
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	maxBytes = min(maxBytes, maxFetchBytes)
	ls := &lease{s: s, g: g, l: l, req: &req, now: now, n: n, maxBytes: maxBytes,
		out: wire.ReplyData{Split: req.Flags&wire.FlagFrames != 0, MaxBytes: maxBytes}}
	if g.Avail > 0 && n > 0 {
		ls.redeliveries()
	}
	if ls.room() && g.Next < s.end(l) {
		ls.fresh()
	}
	if ls.cnt > 0 {
		g.Held[req.Member] += ls.cnt
		g.Dirty = true
		s.wakeAtLocked(now.Add(g.Set.AckWait))
	}
	ld := leased{data: ls.out.Done(), n: uint32(ls.cnt)}
	if req.Flags&wire.FlagStream != 0 && ls.cnt > 0 && ls.room() && int(req.MaxRecords) > ls.cnt {
		ld.open, ld.rest = true, req
		ld.rest.MaxRecords -= uint32(ls.cnt)
		ld.rest.MaxBytes = uint32(maxBytes - ls.size)
	}
	return ld
}

// lease is one fetch's leasing, under the server's lock.
type lease struct {
	s        *Server
	g        *state
	l        *spool.Log
	req      *wire.Request
	now      time.Time
	n        int // records the fetch may take
	maxBytes int
	out      wire.ReplyData
	cnt      int               // records leased
	size     int               // their values, plus 64 bytes each
	run      *durable.LeaseRun // the run this fetch leases fresh records in
	// ahead, while fresh reads, is how many records the log holds from
	// the one being read on: the reply's buffer is sized for those, not
	// for all the fetch may take (a reply of one record, as at low
	// rates, would otherwise take a wire.FrameBytes buffer).
	ahead int
	slab  []durable.Pending // for the pending entries of fresh records
}

// room reports whether the fetch may take another record.
func (ls *lease) room() bool { return ls.cnt < ls.n && ls.size < ls.maxBytes }

// emit adds r, leased for its deliveries-th time, to the reply.
func (ls *lease) emit(r *spool.Record, deliveries uint32) {
	ls.g.cnt.Delivered++
	if deliveries > 1 {
		ls.g.cnt.Redelivered++
	}
	left := ls.n - ls.cnt
	if ls.ahead > 0 {
		left = min(left, ls.ahead)
	}
	ls.out.Add(r, deliveries, left)
	ls.cnt++
	ls.size += len(r.Value) + 64
}

// take leases r, pending as p; fresh says it was just read from the
// cursor (the journal's default for those is one delivery: nothing to
// note).
func (ls *lease) take(o uint64, p *durable.Pending, r *spool.Record, fresh bool) {
	p.Deliveries++
	p.Member, p.Leased, p.Deadline = ls.req.Member, ls.now, ls.now.Add(ls.g.Set.AckWait)
	if !fresh || p.Deliveries != 1 {
		ls.g.Delivered(o)
	}
	ls.emit(r, p.Deliveries)
}

// redeliveries leases the pending records that are due, lowest offset
// first.
func (ls *lease) redeliveries() {
	g := ls.g
	var due []uint64
	for o, p := range g.Pend {
		if p.Member == "" && !p.NotBefore.After(ls.now) {
			due = append(due, o)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i] < due[j] })
	for _, o := range due {
		if !ls.room() {
			break
		}
		if g.Blocked(o, g.Pend[o]) {
			continue // an earlier record of its key is pending
		}
		r, err := readOne(ls.l, o)
		if err != nil {
			// Gone (retention) or damaged: it cannot be delivered.
			ls.s.log.Warn("record for redelivery unreadable", "stream", g.Stream, "group", g.Group, "offset", o, "err", err)
			g.Settle(o)
			continue
		}
		if nb, ok := notBefore(r.Headers); ok && nb.After(ls.now) {
			// Not due: the state was reloaded, or an earlier record of
			// its key held it until now. The clock serves it when due.
			g.Pend[o].NotBefore = nb
			ls.s.wakeAtLocked(nb)
			continue
		}
		g.Avail--
		ls.take(o, g.Pend[o], &r, false)
	}
}

// fresh leases records from the group's cursor, up to what the log held
// when it began.
func (ls *lease) fresh() {
	g, l := ls.g, ls.l
	if oldest := l.OldestOffset(); g.Next < oldest {
		for o := g.Next; o < oldest; o++ {
			g.Settle(o) // removed by retention before the group read them
		}
		g.Next = oldest
	}
	rd, err := g.reader(l, !ls.s.cfg.LeaseAfterSync)
	if err != nil {
		return
	}
	end := ls.s.end(l)
	for ls.room() && rd.Offset() < end {
		// Below end the record is there: Next does not wait, and with
		// a context that has ended it never could (under the server's
		// lock).
		r, err := rd.Next(ls.s.noWait)
		if err != nil {
			ls.s.log.Warn("read for group", "stream", g.Stream, "group", g.Group, "offset", rd.Offset(), "err", err)
			return
		}
		for o := g.Next; o < r.Offset; o++ {
			g.Settle(o) // a gap in the log
		}
		g.Next = r.Offset + 1
		g.Dirty = true
		ls.ahead = int(min(end-r.Offset, maxFetchRecords))
		if (!g.Set.Ordered || keyOf(r.Headers) == "") && !delayed(r.Headers, ls.now) {
			// The common case: leased in a run.
			if ls.run == nil || ls.run.To != r.Offset {
				ls.run = &durable.LeaseRun{From: r.Offset, To: r.Offset, Member: ls.req.Member, Leased: ls.now, Deadline: ls.now.Add(g.Set.AckWait)}
				g.Runs = append(g.Runs, ls.run)
			}
			ls.run.To++
			ls.run.Left++
			g.InRuns++
			ls.emit(&r, 1)
			continue
		}
		ls.pending(&r)
	}
}

// pending leases, or keeps pending, a fresh record that has a key in an
// ordered group or a not-before time: it gets a pending entry of its
// own.
func (ls *lease) pending(r *spool.Record) {
	g := ls.g
	if len(ls.slab) == 0 {
		// One allocation for the pending records of a fetch.
		ls.slab = make([]durable.Pending, min(ls.n-ls.cnt+16, maxFetchRecords))
	}
	p := &ls.slab[0]
	ls.slab = ls.slab[1:]
	g.Pend[r.Offset] = p
	if k := keyOf(r.Headers); k != "" && g.Set.Ordered {
		p.Key = k
		q := g.Keys[k]
		g.Keys[k] = append(q, r.Offset)
		if len(q) > 0 {
			// Behind an earlier record of its key: leased once that
			// one is settled.
			g.Avail++
			g.Delivered(r.Offset) // not delivered yet
			return
		}
	}
	if nb, ok := notBefore(r.Headers); ok && nb.After(ls.now) {
		// Delayed delivery: not leased before it is due, and the
		// records behind it go on.
		p.NotBefore = nb
		g.Avail++
		g.Delivered(r.Offset) // not delivered yet
		ls.s.wakeAtLocked(nb) // the clock serves it when due, not the next fetch
		return
	}
	ls.take(r.Offset, p, r, true)
}

// reader returns the group's reader of l at its cursor, kept between
// fetches so that reading on costs no new seek. It reuses its read
// buffer: leaseLocked copies what it keeps of a record (into the reply,
// a key string) before it reads the next.
func (g *state) reader(l *spool.Log, written bool) (*spool.Reader, error) {
	if g.rd != nil && (g.rdLog != l || g.rd.Offset() != g.Next || g.rdWritten != written) {
		g.rd.Close()
		g.rd = nil
	}
	if g.rd == nil {
		rd, err := l.NewReader(g.Next)
		if err != nil {
			return nil, err
		}
		rd.ReuseBuffer()
		if written {
			rd.ReadWritten()
		}
		g.rd, g.rdLog, g.rdWritten = rd, l, written
	}
	return g.rd, nil
}

// rekey rebuilds an ordered group's key queues after its state was
// loaded (the file keeps no keys): it reads every pending record.
func (s *Server) rekey(g *state, l *spool.Log) {
	offs := make([]uint64, 0, len(g.Pend))
	for o := range g.Pend {
		offs = append(offs, o)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	for _, o := range offs {
		r, err := readOne(l, o)
		if err != nil {
			continue // settled as unreadable when it is due
		}
		if k := keyOf(r.Headers); k != "" {
			g.Pend[o].Key = k
			g.Keys[k] = append(g.Keys[k], o)
		}
	}
}

func readOne(l *spool.Log, o uint64) (spool.Record, error) {
	rd, err := l.NewReader(o)
	if err != nil {
		return spool.Record{}, err
	}
	defer rd.Close()
	rd.ReadWritten() // a record the group read (leased before its fsync, by default)
	if o >= l.WrittenOffset() {
		return spool.Record{}, errors.New("beyond the end of the log")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r, err := rd.Next(ctx)
	if err != nil {
		return r, err
	}
	if r.Offset != o {
		return r, errors.New("record not in the log")
	}
	return r, nil
}

// kickLocked serves the group's parked fetches that can be served now.
// It returns their replies, which the caller sends after it unlocks s.mu
// (leases need not be on disk before they are sent: a lease lost in a
// crash is a record in flight, redelivered).
func (s *Server) kickLocked(g *state, l *spool.Log) {
	if len(g.parked) == 0 {
		return
	}
	now := time.Now()
	keep := g.parked[:0]
	pc, canAsk := s.cfg.Send.(peerCredentials)
	for _, p := range g.parked {
		if canAsk {
			// A fetch whose member's connection is gone (a member
			// killed) is dropped: leased, its records would wait for
			// AckWait and count a failed delivery.
			if _, connected := pc.PeerCredentials(p.env); !connected {
				continue
			}
		}
		ld := s.leaseLocked(g, l, p.req, now)
		if ld.n == 0 && p.deadline.After(now) {
			keep = append(keep, p)
			continue
		}
		if ld.open && p.deadline.After(now) {
			s.postLocked(p.env, wire.FetchReplyStatus(wire.StatusOpen, p.req.ID, ld.n, ld.data))
			p.req = ld.rest
			keep = append(keep, p)
			continue
		}
		s.postLocked(p.env, wire.FetchReply(p.req.ID, ld.n, ld.data))
	}
	for i := len(keep); i < len(g.parked); i++ {
		g.parked[i] = nil
	}
	g.parked = keep
}

// postLocked queues a fetch reply made under s.mu; unlockAndSend sends
// the queued replies, once s.mu is unlocked, in the order they were made:
// the replies of a stream fetch (wire.StatusOpen, then the last) are made by
// whichever goroutine serves it, and must reach the member in order.
// The outbox is bounded as the fetches are: every reply in it answers a
// parked or arriving fetch, within that fetch's max bytes (a stream's
// replies together), and the socket's Send never waits, so it drains as
// fast as it fills.
func (s *Server) postLocked(env [][]byte, frames [][]byte) {
	s.outbox = append(s.outbox, pendingReply{env, frames})
}

// unlockAndSend unlocks s.mu (which the caller holds) and sends the
// posted replies, unless another goroutine is sending them: that one
// sends these too, after its own. With nothing posted it only unlocks.
func (s *Server) unlockAndSend() {
	if s.sending || len(s.outbox) == 0 {
		s.mu.Unlock()
		return
	}
	s.sending = true
	for len(s.outbox) > 0 {
		rs := s.outbox
		s.outbox = s.spare[:0]
		s.mu.Unlock()
		for i := range rs {
			s.sendFrames(rs[i].env, rs[i].frames)
		}
		clear(rs)
		s.mu.Lock()
		s.spare = rs
	}
	s.sending = false
	s.mu.Unlock()
}
