package pull

// ackWindow is what a consumer knows of one publisher's acknowledgements:
// the committable floor (the offset after the longest acknowledged prefix)
// and the offsets acknowledged above it, out of order. Acks may come in any
// order and more than once; the floor only moves up, except at reset.
//
// An ackWindow is not safe for concurrent use: the Consumer guards it with
// its mutex. Its memory is one map entry per acknowledged offset above the
// floor, so at most the records delivered and not yet acknowledged in
// order.
type ackWindow struct {
	next  uint64              // the floor: the offset after the acknowledged prefix
	ahead map[uint64]struct{} // acknowledged offsets above next
	skips map[uint64]uint64   // gaps above next: from -> to, offsets [from, to) that do not exist
}

// reset forgets every acknowledgement and puts the floor at next, the first
// offset still to be acknowledged.
func (w *ackWindow) reset(next uint64) {
	w.next, w.ahead, w.skips = next, nil, nil
}

// truncate forgets what the window knows at and above at (those offsets
// now name other records, or none) and keeps what it knows below, so
// that acknowledgements of records below at, delivered before a reset,
// still move the floor. It returns false, changing nothing, when the
// floor is above at: then only reset fits.
func (w *ackWindow) truncate(at uint64) bool {
	if w.next > at {
		return false
	}
	for o := range w.ahead {
		if o >= at {
			delete(w.ahead, o)
		}
	}
	for from, to := range w.skips {
		switch {
		case from >= at:
			delete(w.skips, from)
		case to > at:
			w.skips[from] = at
		}
	}
	return true
}

// skip records that the offsets [from, to) do not exist: the floor passes
// over them once it reaches from. One map entry per gap.
func (w *ackWindow) skip(from, to uint64) {
	if to <= w.next || to <= from {
		return
	}
	if from <= w.next {
		w.next = to
		w.advance()
		return
	}
	if w.skips == nil {
		w.skips = make(map[uint64]uint64)
	}
	w.skips[from] = max(w.skips[from], to)
}

// ack records that offset is acknowledged. An offset below the floor is
// already covered and ignored.
func (w *ackWindow) ack(offset uint64) {
	if offset < w.next {
		return
	}
	if offset > w.next {
		if w.ahead == nil {
			w.ahead = make(map[uint64]struct{})
		}
		w.ahead[offset] = struct{}{}
		return
	}
	w.next++
	w.advance()
}

// advance moves the floor over acknowledged offsets and gaps right above it.
func (w *ackWindow) advance() {
	for {
		if _, ok := w.ahead[w.next]; ok {
			delete(w.ahead, w.next)
			w.next++
			continue
		}
		if to, ok := w.skips[w.next]; ok {
			delete(w.skips, w.next)
			w.next = max(w.next, to)
			continue
		}
		return
	}
}

// floor returns the offset after the longest acknowledged prefix: the
// position that may be committed.
func (w *ackWindow) floor() uint64 { return w.next }
