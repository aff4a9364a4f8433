// Package coalesce keeps, per key, only the latest value not yet taken, in
// the order the keys first became pending. A producer that must never block
// (a gossip event loop) puts; a slow consumer takes the current state of
// each key instead of an ever-growing backlog. Memory is bounded by the
// number of distinct keys.
package coalesce

import "sync"

// Queue is a coalescing queue. The zero value is not usable; use New. It is
// safe for concurrent use.
type Queue[K comparable, V any] struct {
	ready chan struct{}

	mu      sync.Mutex
	pending map[K]V
	order   []K // keys with a pending value, oldest first
}

// New returns an empty queue.
func New[K comparable, V any]() *Queue[K, V] {
	return &Queue[K, V]{ready: make(chan struct{}, 1), pending: make(map[K]V)}
}

// Put records v as the latest value of k, replacing one not yet taken. It
// never blocks.
func (q *Queue[K, V]) Put(k K, v V) {
	q.mu.Lock()
	if _, ok := q.pending[k]; !ok {
		q.order = append(q.order, k)
	}
	q.pending[k] = v
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// Take removes and returns the oldest pending key with its latest value,
// or ok false when nothing is pending.
func (q *Queue[K, V]) Take() (k K, v V, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.order) == 0 {
		return k, v, false
	}
	k = q.order[0]
	var zero K
	q.order[0] = zero
	q.order = q.order[1:]
	v = q.pending[k]
	delete(q.pending, k)
	return k, v, true
}

// Ready is signalled after a Put; wait on it when Take finds nothing.
func (q *Queue[K, V]) Ready() <-chan struct{} { return q.ready }
