package rpc

import (
	"time"
)

// cacheKey identifies a request across retries: the client's id and the
// call's idempotency key.
type cacheKey struct {
	client, key string
}

// waiter is a copy of a request that arrived while its first copy ran: it
// gets the same reply.
type waiter struct {
	env [][]byte
	id  uint64
}

// cacheEntry is one idempotency key's state: running (done false, with
// the requests waiting for it) or done (the reply, until expires).
type cacheEntry struct {
	done    bool
	waiters []waiter
	status  Status
	frames  [][]byte // reply frames after the header
	expires time.Time
}

// replyCache remembers the replies of requests with idempotency keys for
// a window, so that a retry gets the reply instead of running the handler
// again. It is not safe for concurrent use: the Server guards it with its
// mutex. Entries expire in insertion order (every done entry lives for the
// same window), and the oldest done entries go first when it is full.
type replyCache struct {
	window time.Duration
	max    int
	m      map[cacheKey]*cacheEntry
	order  []cacheKey // done entries, oldest first; may hold keys since removed
	head   int        // index of the oldest live item in order
}

func newReplyCache(window time.Duration, max int) *replyCache {
	return &replyCache{window: window, max: max, m: make(map[cacheKey]*cacheEntry)}
}

// get returns k's entry, dropping it if it expired.
func (c *replyCache) get(k cacheKey, now time.Time) (*cacheEntry, bool) {
	e, ok := c.m[k]
	if ok && e.done && !now.Before(e.expires) {
		delete(c.m, k)
		return nil, false
	}
	return e, ok
}

// start records that k's handler is about to run.
func (c *replyCache) start(k cacheKey) *cacheEntry {
	e := &cacheEntry{}
	c.m[k] = e
	return e
}

// abandon forgets a running entry whose handler never ran (the request
// expired), so that a retry runs it. It returns the waiters.
func (c *replyCache) abandon(k cacheKey) []waiter {
	e, ok := c.m[k]
	if !ok || e.done {
		return nil
	}
	delete(c.m, k)
	return e.waiters
}

// finish stores k's reply and returns the requests that waited for it.
func (c *replyCache) finish(k cacheKey, st Status, frames [][]byte, now time.Time) []waiter {
	e, ok := c.m[k]
	if !ok {
		return nil
	}
	w := e.waiters
	e.waiters = nil
	e.done, e.status, e.frames, e.expires = true, st, frames, now.Add(c.window)
	c.order = append(c.order, k)
	c.prune(now)
	return w
}

// prune drops expired entries and, beyond max, the oldest done ones.
func (c *replyCache) prune(now time.Time) {
	for c.head < len(c.order) {
		k := c.order[c.head]
		e, ok := c.m[k]
		switch {
		case !ok || !e.done:
			// removed since, or restarted after expiry: not ours to drop
		case len(c.m) > c.max || !now.Before(e.expires):
			delete(c.m, k)
		default:
			c.compact()
			return
		}
		c.order[c.head] = cacheKey{}
		c.head++
	}
	c.compact()
}

// compact reclaims the consumed front of order once it is half of it.
func (c *replyCache) compact() {
	if c.head > 1024 && c.head*2 > len(c.order) {
		n := copy(c.order, c.order[c.head:])
		clear(c.order[n:])
		c.order = c.order[:n]
		c.head = 0
	}
}

// len returns the number of entries, running ones included.
func (c *replyCache) len() int { return len(c.m) }
