package spool

import (
	"strconv"
	"time"
)

// The writer's side of deduplication: it decides, in the one goroutine
// that assigns offsets, which records of an append are duplicates, so two
// concurrent appends of one id can never both land.

// prodMark is what a Log keeps of one producer: its last sequence, the
// offset of the record that carried it and that record's time.
type prodMark struct {
	Seq    uint64
	Offset uint64
	Time   int64
}

// producers is a table of producers' marks, at most max of them: a new
// producer beyond max makes the one whose last record is oldest forgotten.
type producers struct {
	max int
	m   map[string]prodMark
}

func newProducers(max int) producers { return producers{max: max, m: make(map[string]prodMark)} }

// set records producer's mark and returns the producer forgotten to make
// room ("" for none).
func (p *producers) set(producer string, mk prodMark) string {
	if old, ok := p.m[producer]; ok {
		if mk.Offset > old.Offset {
			p.m[producer] = mk
		}
		return ""
	}
	evicted := ""
	if len(p.m) >= p.max {
		var oldest prodMark
		for id, m := range p.m {
			if evicted == "" || m.Time < oldest.Time || (m.Time == oldest.Time && m.Offset < oldest.Offset) {
				evicted, oldest = id, m
			}
		}
		delete(p.m, evicted)
	}
	p.m[producer] = mk
	return evicted
}

func (p *producers) clone() producers {
	c := producers{max: p.max, m: make(map[string]prodMark, len(p.m))}
	for k, v := range p.m {
		c.m[k] = v
	}
	return c
}

// idEntry is a remembered message id: the offset and time of its record.
type idEntry struct {
	off uint64
	t   int64
}

type idRef struct {
	id  string
	off uint64
	t   int64
}

// msgIDs remembers the message ids of the window, oldest first in order.
type msgIDs struct {
	window int64 // nanoseconds
	max    int
	m      map[string]idEntry
	order  []idRef // in append order; order[head:] may name ids since replaced
	head   int
}

func newMsgIDs(window time.Duration, max int) msgIDs {
	return msgIDs{window: int64(window), max: max, m: make(map[string]idEntry)}
}

// expire forgets ids older than the window at now, and the oldest beyond max.
func (s *msgIDs) expire(now int64) {
	for s.head < len(s.order) {
		r := s.order[s.head]
		if r.t >= now-s.window && len(s.m) <= s.max {
			break
		}
		if e, ok := s.m[r.id]; ok && e.off == r.off {
			delete(s.m, r.id)
		}
		s.order[s.head] = idRef{}
		s.head++
	}
	if s.head > 1024 && s.head > len(s.order)/2 {
		n := copy(s.order, s.order[s.head:])
		clear(s.order[n:])
		s.order, s.head = s.order[:n], 0
	}
}

// lookup returns the offset of id's record if it is within the window at now.
func (s *msgIDs) lookup(id string, now int64) (uint64, bool) {
	e, ok := s.m[id]
	if !ok || e.t < now-s.window {
		return 0, false
	}
	return e.off, true
}

func (s *msgIDs) add(id string, off uint64, t int64) {
	if e, ok := s.m[id]; ok && e.off >= off {
		return
	}
	s.m[id] = idEntry{off, t}
	s.order = append(s.order, idRef{id, off, t})
}

// dedupWriter is the writer goroutine's deduplication state.
type dedupWriter struct {
	ids   msgIDs
	prods producers
	// Scratch for one call: what its earlier records added.
	callIDs   []idRef
	callProds []callProd
	verdicts  []verdict
}

type callProd struct {
	producer string
	seq, off uint64
}

// verdict is the decision for one dedupKey of a call.
type verdict struct {
	dup    bool
	known  bool
	byProd bool   // a duplicate by its producer sequence (else by message id)
	off    uint64 // the original's offset (dup), or the record's (new)
}

// prodEvent is a producer mark the syncer applies to the durable view
// once the record is acknowledged.
type prodEvent struct {
	producer string
	mark     prodMark
}

// dedupAppend decides which records of a are duplicates, when its first
// new record will be stored at off (writer goroutine). It drops the
// duplicates from a.recs (setting a.dd.dups), or fails the whole call
// (a.dd.err, no records) on a sequence error; it remembers the new
// records and adds what the durable view needs to pw.
func (l *Log) dedupAppend(ack *Ack, off uint64, pw *pendingWrite) {
	d, a := l.dd, ack.dd
	if pw.dd == nil {
		pw.dd = &pwDedup{}
	}
	d.ids.expire(ack.now)
	d.callIDs, d.callProds, d.verdicts = d.callIDs[:0], d.callProds[:0], d.verdicts[:0]
	dups := 0
	for _, k := range a.keys {
		pos := off + uint64(k.idx-dups)
		v := verdict{off: pos}
		if k.seq != 0 {
			last, lastOff, known := uint64(0), uint64(0), false
			for i := len(d.callProds) - 1; i >= 0; i-- {
				if d.callProds[i].producer == k.producer {
					last, lastOff, known = d.callProds[i].seq, d.callProds[i].off, true
					break
				}
			}
			if !known {
				if m, ok := d.prods.m[k.producer]; ok {
					last, lastOff, known = m.Seq, m.Offset, true
				}
			}
			switch {
			case !known && k.seq != 1:
				ack.fail(&SequenceError{Producer: k.producer, Seq: k.seq, Unknown: true})
				return
			case known && k.seq <= last:
				v = verdict{dup: true, known: k.seq == last, byProd: true, off: lastOff}
				if !v.known {
					v.off = 0
					if o, ok := d.ids.lookup(k.msgID, ack.now); ok && k.msgID != "" {
						v.known, v.off = true, o // the record's id still knows where it is
					}
				}
			case known && k.seq != last+1:
				ack.fail(&SequenceError{Producer: k.producer, Seq: k.seq, Last: last})
				return
			}
		}
		// With a producer, its sequence alone decides (the id only finds
		// the original): what decides must be in the record's own header,
		// so that a restart rebuilds the same marks.
		if k.seq == 0 && k.msgID != "" {
			for i := len(d.callIDs) - 1; i >= 0; i-- {
				if d.callIDs[i].id == k.msgID {
					v = verdict{dup: true, known: true, off: d.callIDs[i].off}
					break
				}
			}
			if !v.dup {
				if o, ok := d.ids.lookup(k.msgID, ack.now); ok {
					v = verdict{dup: true, known: true, off: o}
				}
			}
		}
		if v.dup {
			dups++
		} else {
			if k.seq != 0 {
				d.callProds = append(d.callProds, callProd{k.producer, k.seq, pos})
			}
			if k.msgID != "" {
				d.callIDs = append(d.callIDs, idRef{id: k.msgID, off: pos})
			}
		}
		d.verdicts = append(d.verdicts, v)
	}
	// The call stands: remember its new records, drop its duplicates.
	for i, k := range a.keys {
		v := d.verdicts[i]
		if v.dup {
			a.dups = append(a.dups, Duplicate{Index: k.idx, Offset: v.off, Known: v.known})
			continue
		}
		t := ack.now
		if r := &ack.recs[k.idx]; !r.Time.IsZero() {
			t = r.Time.UnixNano()
		}
		if k.seq != 0 {
			mk := prodMark{Seq: k.seq, Offset: v.off, Time: t}
			if gone := d.prods.set(k.producer, mk); gone != "" {
				l.log.Warn("producer forgotten: too many producers", "producer", gone, "limit", d.prods.max)
			}
			pw.dd.prodEvents = append(pw.dd.prodEvents, prodEvent{k.producer, mk})
		}
		if k.msgID != "" {
			d.ids.add(k.msgID, v.off, t)
			pw.dd.idTime = max(pw.dd.idTime, t)
		}
	}
	if dups == 0 {
		return
	}
	keep := make([]Record, 0, len(ack.recs)-dups)
	di := 0
	for i := range ack.recs {
		if di < len(a.dups) && a.dups[di].Index == i {
			di++
			continue
		}
		keep = append(keep, ack.recs[i])
	}
	if len(keep) == 0 {
		d0, k := a.dups[0], a.keys[0]
		reason := "message id " + k.msgID
		if d.verdicts[0].byProd {
			reason = "producer " + k.producer + " sequence " + strconv.FormatUint(k.seq, 10)
		}
		a.err = &DuplicateError{Offset: d0.Offset, Known: d0.Known, Reason: reason}
		a.first = d0.Offset
	}
	ack.recs = keep
}

// fail ends the call with err before anything of it is stored.
func (a *Ack) fail(err error) {
	a.dd.err = err
	a.recs = nil
}

// pwDedup is what a written group changes in the durable view.
type pwDedup struct {
	prodEvents []prodEvent
	idTime     int64 // the newest time of a record with a message id
}

// ackDedup is what deduplication decided for one append.
type ackDedup struct {
	keys  []dedupKey
	dups  []Duplicate
	err   error  // *DuplicateError or *SequenceError: nothing of the call is stored
	first uint64 // with a *DuplicateError: the offset of the first record's original
}
