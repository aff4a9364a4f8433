package socket

// msgRing is a circular buffer of messages that grows on demand. It is not
// safe for concurrent use: the queues built on it hold their own locks. A
// receive queue's ring also keeps when each message arrived (putAt,
// oldestAt) in stamps, parallel to buf.
type msgRing struct {
	buf     []Msg
	stamps  []int64 // nil unless putAt is used
	head, n int
}

// putAt is put for a ring that keeps arrival times: m arrived at at (see
// clock). A ring is filled with put or with putAt, never both.
func (r *msgRing) putAt(m Msg, at int64, limit int) {
	if r.n == len(r.buf) || r.stamps == nil {
		r.grow(r.n+1, limit, true)
	}
	i := r.head + r.n
	if i >= len(r.buf) {
		i -= len(r.buf)
	}
	r.buf[i] = m
	r.stamps[i] = at
	r.n++
}

// oldestAt returns when the oldest message arrived (the ring must not be
// empty and must be filled with putAt).
func (r *msgRing) oldestAt() int64 { return r.stamps[r.head] }

// put appends m, growing the buffer up to limit messages (put must not be
// called on a ring already holding limit). A ring grows by doubling, from
// 64, so an idle peer costs no buffer at all.
func (r *msgRing) put(m Msg, limit int) {
	if r.n == len(r.buf) {
		r.grow(r.n+1, limit, false)
	}
	i := r.head + r.n
	if i >= len(r.buf) {
		i -= len(r.buf)
	}
	r.buf[i] = m
	r.n++
}

// grow makes room for at least need messages, and for at most
// max(limit, need), keeping their order (and arrival times, if stamped).
func (r *msgRing) grow(need, limit int, stamped bool) {
	c := min(max(2*len(r.buf), 64, need), max(limit, need))
	b := make([]Msg, c)
	var st []int64
	if stamped {
		st = make([]int64, c)
	}
	for i := range r.n {
		j := r.head + i
		if j >= len(r.buf) {
			j -= len(r.buf)
		}
		b[i] = r.buf[j]
		if st != nil && r.stamps != nil {
			st[i] = r.stamps[j]
		}
	}
	r.buf, r.stamps, r.head = b, st, 0
}

// get removes and returns the oldest message (the ring must not be empty).
func (r *msgRing) get() Msg {
	m := r.buf[r.head]
	r.buf[r.head] = Msg{}
	r.head++
	if r.head == len(r.buf) {
		r.head = 0
	}
	r.n--
	return m
}

// dropNewest removes up to k of the newest messages and returns how many
// it removed.
func (r *msgRing) dropNewest(k int) int {
	k = min(k, r.n)
	for i := r.n - k; i < r.n; i++ {
		j := r.head + i
		if j >= len(r.buf) {
			j -= len(r.buf)
		}
		r.buf[j] = Msg{}
	}
	r.n -= k
	return k
}

// at returns the i-th oldest message (i < r.n).
func (r *msgRing) at(i int) Msg {
	j := r.head + i
	if j >= len(r.buf) {
		j -= len(r.buf)
	}
	return r.buf[j]
}
