package socket

// msgRing is a circular buffer of messages that grows on demand. It is not
// safe for concurrent use: the queues built on it hold their own locks.
type msgRing struct {
	buf     []Msg
	head, n int
}

// put appends m, growing the buffer up to limit messages (put must not be
// called on a ring already holding limit). A ring grows by doubling, from
// 64, so an idle peer costs no buffer at all.
func (r *msgRing) put(m Msg, limit int) {
	if r.n == len(r.buf) {
		r.grow(r.n+1, limit)
	}
	i := r.head + r.n
	if i >= len(r.buf) {
		i -= len(r.buf)
	}
	r.buf[i] = m
	r.n++
}

// grow makes room for at least need messages, and for at most
// max(limit, need), keeping their order.
func (r *msgRing) grow(need, limit int) {
	c := min(max(2*len(r.buf), 64, need), max(limit, need))
	b := make([]Msg, c)
	for i := range r.n {
		j := r.head + i
		if j >= len(r.buf) {
			j -= len(r.buf)
		}
		b[i] = r.buf[j]
	}
	r.buf, r.head = b, 0
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
