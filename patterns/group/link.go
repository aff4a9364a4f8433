package group

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/patterns/group/internal/wire"

	"github.com/fastmq/fastmq/socket"
)

// link is a member's connection to one publisher: a DEALER socket, a
// receive goroutine that hands replies to their requests by id, two fetch
// goroutines (each with one fetch open: see FlagPipeline) and a settle
// goroutine that batches acknowledgements.
type link struct {
	m        *Member
	node     string
	endpoint string
	sock     *socket.Socket

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	nextID  uint32
	waiting map[uint32]waiter

	settles chan settleReq
	// gathering is held (filled) by the fetch loop taking buffer slots
	// for its next fetch: one of the two at a time (see fetchLoop).
	gathering chan struct{}
	// piped is closed once the publisher answered a fetch: the second
	// fetch loop waits for it.
	piped     chan struct{}
	pipedOnce sync.Once
	// reserve holds this link's reserve slot (see fetchLoop) while it
	// is free: a slot beyond the member's Buffer that only this link
	// uses, so that a fetch waits at its publisher even while every
	// buffer slot is held by fetches waiting at idle publishers.
	reserve chan struct{}
	// open counts the link's fetches open; idle tells a fetch loop
	// waiting for slots to look again: the other loop's fetch ended and
	// none is open now, or the reserve came back (repay).
	open atomic.Int32
	idle chan struct{}

	gate    sync.Mutex // orders fetches before a leave
	leaving bool
}

type waiter struct {
	fetch  bool
	stream bool // a wire.FlagStream fetch: its wire.StatusOpen replies leave it waiting
	ch     chan replyOrErr
	// done is closed when the request stops waiting: a stream's next
	// reply is then not handed over (ch may still hold the last one).
	done chan struct{}
}

type replyOrErr struct {
	rep wire.Reply
	err error
}

func (m *Member) newLink(node, ep string) (*link, error) {
	scfg := m.cfg.Socket
	scfg.Identity = nil
	sock, err := socket.New(socket.Dealer, scfg)
	if err != nil {
		return nil, fmt.Errorf("group: create socket: %w", err)
	}
	if err := sock.Connect(ep); err != nil {
		sock.Close()
		return nil, fmt.Errorf("group: connect %s: %w", ep, err)
	}
	ln := &link{m: m, node: node, endpoint: ep, sock: sock, waiting: make(map[uint32]waiter), settles: make(chan settleReq, 4096), gathering: make(chan struct{}, 1), piped: make(chan struct{}), reserve: make(chan struct{}, 1), idle: make(chan struct{}, 1)}
	ln.reserve <- struct{}{}
	ln.ctx, ln.cancel = context.WithCancel(m.ctx)
	ln.wg.Add(4)
	go ln.recvLoop()
	go ln.fetchLoop(false)
	go ln.fetchLoop(true)
	go ln.settleLoop()
	return ln, nil
}

func (ln *link) stop() {
	ln.cancel()
	ln.sock.Close()
	ln.wg.Wait()
}

func (ln *link) recvLoop() {
	defer ln.wg.Done()
	for {
		msg, err := ln.sock.Recv(ln.ctx)
		if err != nil {
			if ln.ctx.Err() != nil || errors.Is(err, socket.ErrClosed) {
				return
			}
			continue
		}
		if len(msg.Frames) < 2 || len(msg.Frames[0]) < 6 {
			continue
		}
		id := binary.BigEndian.Uint32(msg.Frames[0][2:])
		ln.mu.Lock()
		w, ok := ln.waiting[id]
		if !w.stream || wire.Status(msg.Frames[0][1]) != wire.StatusOpen {
			delete(ln.waiting, id) // its last reply
		}
		ln.mu.Unlock()
		if !ok {
			continue // a reply to a request that gave up
		}
		// A fetch's records are decoded by fetchLoop, straight into
		// its messages.
		rep, err := wire.DecodeReply(msg.Frames[:2], false)
		switch {
		case err != nil:
		case rep.Status == wire.StatusOpen && !w.stream:
			err = wire.Malformed("status open for a request that is not a stream")
		case len(msg.Frames) > 2 && (!w.fetch || !hasRecords(rep.Status) || rep.Count == 0):
			err = wire.Malformed("%d reply frames, want 2", len(msg.Frames))
		case w.fetch && hasRecords(rep.Status) && rep.Count > 0:
			rep.Parts = msg.Frames[1:]
			if n := wire.PartsLen(rep.Parts); uint64(rep.Count)*26 > n {
				err = wire.Malformed("%d records in %d bytes", rep.Count, n)
			}
		}
		select {
		case w.ch <- replyOrErr{rep, err}:
		case <-w.done: // it gave up meanwhile (its records are dropped: their leases run out)
		case <-ln.ctx.Done():
			return
		}
	}
}

// putReserve gives the link its reserve slot back.
func (ln *link) putReserve() {
	select {
	case ln.reserve <- struct{}{}:
	default: // cannot happen: one reserve, taken before it is put back
	}
}

// hasRecords tells the statuses of fetch replies that carry records.
func hasRecords(st wire.Status) bool { return st == wire.StatusOK || st == wire.StatusOpen }

// call sends r and waits for its reply, at most timeout.
func (ln *link) call(ctx context.Context, r *wire.Request, timeout time.Duration) (wire.Reply, error) {
	var rep wire.Reply
	err := ln.exchange(ctx, r, timeout, func(re wire.Reply) error {
		rep = re
		return nil
	})
	return rep, err
}

// exchange sends r and hands each of its replies to each: one reply, or
// for a FlagStream fetch its StatusOpen replies then the last one, all
// within timeout. An error status ends it with a *StatusError (the reply
// is not handed to each); an error from each ends it too. A fetch is not
// sent once the member leaves: the publisher must see no fetch after the
// leave, or it would lease to a member that is gone.
func (ln *link) exchange(ctx context.Context, r *wire.Request, timeout time.Duration, each func(wire.Reply) error) error {
	if r.Op == wire.OpFetch || r.Op == wire.OpLeave {
		ln.gate.Lock()
		if ln.leaving {
			ln.gate.Unlock()
			return ErrClosed
		}
		ln.leaving = r.Op == wire.OpLeave
		defer func() {
			if r.Op == wire.OpLeave {
				ln.gate.Unlock()
			}
		}()
	}
	ch := make(chan replyOrErr, 1)
	ln.mu.Lock()
	ln.nextID++
	r.ID = ln.nextID
	stream := r.Op == wire.OpFetch && r.Flags&wire.FlagStream != 0
	done := make(chan struct{})
	ln.waiting[r.ID] = waiter{fetch: r.Op == wire.OpFetch, stream: stream, ch: ch, done: done}
	ln.mu.Unlock()
	defer func() {
		ln.mu.Lock()
		delete(ln.waiting, r.ID)
		ln.mu.Unlock()
		close(done)
	}()
	r.Stream, r.Group, r.Member = ln.m.cfg.Stream, ln.m.cfg.Group, ln.m.id
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := ln.sock.Send(ctx, socket.Msg{Frames: wire.EncodeRequest(r)})
	if r.Op == wire.OpFetch {
		ln.gate.Unlock()
	}
	if err != nil {
		return err
	}
	for {
		select {
		case re := <-ch:
			if re.err != nil {
				return re.err
			}
			st := re.rep.Status
			if st != wire.StatusOK && st != wire.StatusPartial && !(stream && st == wire.StatusOpen) {
				return &StatusError{Status: Status(st), Msg: string(re.rep.Data)}
			}
			if err := each(re.rep); err != nil || st != wire.StatusOpen {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fetchLoop leases records while the member has buffer room. The
// second loop runs once the publisher answered a fetch: while one loop's
// reply travels, the other's fetch waits at the publisher for the next
// record (the protocol's pipeline flag).
func (ln *link) fetchLoop(second bool) {
	defer ln.wg.Done()
	if second {
		select {
		case <-ln.piped:
		case <-ln.ctx.Done():
			return
		}
	}
	backoff := 50 * time.Millisecond
	for {
		f, ok := ln.gather()
		if !ok {
			return
		}
		err := ln.exchange(ln.ctx, ln.fetchRequest(f.n), ln.m.cfg.MaxWait+5*time.Second, f.deliver)
		f.end()
		if ln.ctx.Err() != nil {
			return
		}
		if err == nil {
			backoff = 50 * time.Millisecond
			continue
		}
		if !ln.fetchFailed(err, &backoff) {
			return
		}
	}
}

// fetch is one fetch of a fetch loop: the buffer slots it holds, and
// how many of them records that reached the buffer took.
type fetch struct {
	ln       *link
	n        int  // slots held: the records asked for
	reserved bool // one of them is the link's reserve
	used     int  // records handed to the buffer
	owes     bool // a record holds the reserve (credit.owe)
}

// gather takes the slots of the link's next fetch (see takeSlots and
// gatherMore), and counts the fetch open; false once the link stops.
//
// One of the link's two fetch loops gathers slots at a time: two that
// shared the slots coming back (a channel hands them out in turn) would
// each have half the buffer's worth only once the buffer ran dry, fetch
// together, and leave the member a round trip with nothing to hand out.
// One at a time, a fetch goes out each half buffer taken, while the
// other half waits. (The loops of other publishers' links still take
// turns with these: one whose fetch waits there for records cannot keep
// every slot.)
func (ln *link) gather() (*fetch, bool) {
	c := ln.m.credit
	select {
	case ln.gathering <- struct{}{}:
	case <-ln.ctx.Done():
		return nil, false
	}
	n, reserved, ok := ln.takeSlots()
	if !ok {
		<-ln.gathering
		return nil, false
	}
	limit := c.half()
	if n > limit {
		c.give(n - limit)
		n = limit
	}
	if n, ok = ln.gatherMore(n, limit, reserved); !ok {
		c.give(n) // not reserved: that fetch goes out at once
		<-ln.gathering
		return nil, false
	}
	ln.open.Add(1) // before the other loop may gather and look
	<-ln.gathering
	if n > limit {
		c.give(n - limit)
		n = limit
	}
	if reserved && n > 1 {
		ln.putReserve() // free slots came: no need of it
		n, reserved = n-1, false
	}
	return &fetch{ln: ln, n: n, reserved: reserved}, true
}

// takeSlots waits for free slots, then takes every other free one.
// While Next waits for records, none is buffered and no fetch of this
// link is open, it may take the link's reserve slot instead (reserved).
// Without it, a member with fewer free slots than fetch loops (a Buffer
// of 1 with two publishers, or the default 64 with three) could have
// every slot in fetches waiting at idle publishers and none at this one:
// a record appended here then waited until one of those ended empty
// (MaxWait, 5 s by default), while Next waited too. A fetch with the
// reserve goes out at once; it gives the reserve back if free slots came
// meanwhile. It reports false once the link stops.
func (ln *link) takeSlots() (n int, reserved, ok bool) {
	m := ln.m
	for n == 0 {
		if n = m.credit.tryTake(); n > 0 {
			continue
		}
		var reserve, hungry <-chan struct{}
		if ln.open.Load() == 0 && m.nlinks.Load() > 1 {
			hungry = m.hungryChan() // before starving: a Next waiting after it closes this one
			if m.starving() {
				reserve = ln.reserve
			}
		}
		select {
		case n = <-m.credit.free:
		case <-reserve:
			n, reserved = 1, true
		case <-ln.idle: // the other loop's fetch ended, or the reserve came back
		case <-hungry: // Next waits
		case <-ln.ctx.Done():
			return 0, false, false
		}
	}
	return n, reserved, true
}

// gatherMore adds free slots to the n taken, up to limit. While records
// wait in the buffer, it waits for half of it before fetching: a fast
// reader would otherwise make every fetch a fetch of one record. With
// the buffer empty, or with the reserve, it fetches at once. It reports
// false (with the slots it holds) once the link stops.
func (ln *link) gatherMore(n, limit int, reserved bool) (int, bool) {
	m := ln.m
	for n < limit {
		if k := m.credit.tryTake(); k > 0 {
			n += k
			continue
		}
		if reserved || n >= m.credit.half() || m.empty() {
			break
		}
		select {
		case k := <-m.credit.free:
			n += k
		case <-ln.ctx.Done():
			return n, false
		}
	}
	return n, true
}

// fetchRequest returns the request of a fetch of n records. A publisher
// of this protocol version knows every flag (see the wire package).
func (ln *link) fetchRequest(n int) *wire.Request {
	m := ln.m
	req := &wire.Request{Op: wire.OpFetch, MaxRecords: uint32(n), MaxBytes: 1 << 20,
		WaitMillis: uint32(m.cfg.MaxWait / time.Millisecond), AckWaitMillis: uint32(m.cfg.AckWait / time.Millisecond),
		MaxDeliver: uint16(min(m.cfg.MaxDeliver, 65535)), MaxAckPending: uint32(m.cfg.MaxAckPending),
		Start: startKind(m.cfg.Start), StartValue: startValue(m.cfg.Start), Backoff: m.cfg.Backoff}
	req.Flags = wire.FlagFrames | wire.FlagPipeline | wire.FlagStream
	if m.cfg.Ordered {
		req.Flags |= wire.FlagOrdered
	}
	return req
}

// deliver hands one reply's records to the buffer. A stream's replies
// come until its last one, never more than f.n records in all (the
// publisher leases a fetch no more than it asked for).
func (f *fetch) deliver(rep wire.Reply) error {
	ln, m := f.ln, f.ln.m
	ln.pipedOnce.Do(func() { close(ln.piped) })
	if rep.Count == 0 {
		return nil
	}
	chunks, err := ln.messages(rep, f.n-f.used)
	if err != nil {
		return err
	}
	if f.reserved && !f.owes && len(chunks) > 0 {
		// A record of this fetch holds the reserve: the first slot
		// given back to the member goes back to this link. Owed
		// before the records can be taken, and their slots given
		// back.
		m.credit.owe(ln)
		f.owes = true
	}
	m.qmu.Lock()
	m.inbuf = append(m.inbuf, chunks...) // before Next may take them
	m.qmu.Unlock()
	for _, c := range chunks {
		k := len(c.rest) // Next takes from it once it is in out
		select {         // fast path: one channel locked, not two
		case m.out <- c:
			f.used += k
			continue
		default:
		}
		select {
		case m.out <- c:
			f.used += k
		case <-ln.ctx.Done():
			return ln.ctx.Err()
		}
	}
	return nil
}

// end gives back the slots the fetch's records did not take, and counts
// the fetch closed.
func (f *fetch) end() {
	ln, c := f.ln, f.ln.m.credit
	n := f.n
	if f.reserved && f.used == 0 {
		// No record holds the reserve (none came, or the link stopped
		// before they reached the buffer): it is free again. Unless a
		// slot given back already repaid it: then that slot, which
		// holds no record, goes back to the member with the others.
		if !f.owes || c.unowe(ln) {
			ln.putReserve()
			n--
		}
	}
	c.give(n - f.used)
	if ln.open.Add(-1) == 0 {
		select {
		case ln.idle <- struct{}{}:
		default:
		}
	}
}

// fetchFailed handles a failed fetch: it waits backoff (doubled for the
// next failure, up to 2 s) and reports true, or false when the loop
// stops: the link stopped, or the publisher refuses the stream (said
// once, through Next).
func (ln *link) fetchFailed(err error, backoff *time.Duration) bool {
	m := ln.m
	if errors.Is(err, ErrForbidden) {
		// Asking again cannot help: say it, once, and stop fetching
		// from this publisher.
		m.log.Error("publisher refuses the stream", "peer", ln.node, "stream", m.cfg.Stream, "err", err)
		select {
		case m.errs <- fmt.Errorf("group: publisher %s: %w", ln.node, err):
		default:
		}
		return false
	}
	m.log.Debug("fetch failed", "peer", ln.node, "err", err)
	select {
	case <-time.After(*backoff):
	case <-ln.ctx.Done():
		return false
	}
	*backoff = min(2**backoff, 2*time.Second)
	return true
}

// msgChunk is how many messages one allocation holds: 28 KiB, a size
// class exactly (nothing wasted), under 32 KiB so that they come from the
// small-object classes, not large allocations that the runtime zeroes
// and returns to the system one by one.
const msgChunk = 256

// messages decodes a fetch reply's records into messages, at most n (a
// publisher never sends more than asked for), in chunks of msgChunk.
func (ln *link) messages(rep wire.Reply, n int) ([]*chunk, error) {
	count := min(int(rep.Count), n)
	now := time.Now().UnixNano()
	chunks := make([]*chunk, 0, (count+msgChunk-1)/msgChunk)
	for k := 0; k < count; k += msgChunk {
		c := &chunk{rest: make([]Message, min(msgChunk, count-k))}
		c.at = now
		chunks = append(chunks, c)
	}
	i := 0
	err := wire.DecodeParts(rep.Parts, rep.Count, func(r *wire.Record) {
		if i < count {
			chunks[i/msgChunk].rest[i%msgChunk] = Message{Publisher: ln.node, Offset: r.Offset, Delivery: r.Delivery, Time: r.Time, Headers: r.Headers, Value: r.Value, ln: ln}
		}
		i++
	})
	return chunks, err
}

// leave tells the publisher to release this member's leases.
func (ln *link) leave(ctx context.Context) error {
	_, err := ln.call(ctx, &wire.Request{Op: wire.OpLeave}, 1<<63-1) // ctx alone bounds it
	return err
}

// Info asks the publisher at endpoint for the state of a group of stream
// (an unknown group gives a *StatusError with StatusUnknown). It blocks
// until the answer comes or ctx ends.
func Info(ctx context.Context, endpoint, stream, group string, cfg socket.Config) (GroupStats, error) {
	var st GroupStats
	cfg.Identity = nil
	sock, err := socket.New(socket.Dealer, cfg)
	if err != nil {
		return st, err
	}
	defer sock.Close()
	if err := sock.Connect(endpoint); err != nil {
		return st, err
	}
	if err := sock.Send(ctx, socket.Msg{Frames: wire.EncodeRequest(&wire.Request{Op: wire.OpInfo, ID: 1, Stream: stream, Group: group, Member: "info"})}); err != nil {
		return st, err
	}
	msg, err := sock.Recv(ctx)
	if err != nil {
		return st, err
	}
	rep, err := wire.DecodeReply(msg.Frames, false)
	if err != nil {
		return st, err
	}
	if rep.Status != wire.StatusOK {
		return st, statusError(&rep)
	}
	if err := json.Unmarshal(rep.Data, &st); err != nil {
		return st, fmt.Errorf("group: info reply: %w", err)
	}
	return st, nil
}
