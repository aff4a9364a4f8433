package socket

import (
	"slices"
	"sync"
	"sync/atomic"
)

// smallSubs is the number of distinct prefixes up to which matching scans
// them one by one instead of looking them up by length.
const smallSubs = 8

// subSet is a mutable set of subscription prefixes with reference counts.
// A change costs one map update; the sorted list of distinct prefix
// lengths changes only when a length appears or disappears (a binary
// search and a copy of at most that many ints). Matching costs one map
// lookup per distinct prefix length no longer than the message, so many
// subscriptions of similar length stay cheap. The zero value is an empty
// set. A subSet is not safe for concurrent use.
type subSet struct {
	counts map[string]*int // prefix -> reference count (> 0)
	nlen   map[int]int     // prefix length -> distinct prefixes of that length
	lens   []int           // distinct prefix lengths, ascending
}

func (t *subSet) len() int { return len(t.counts) }

// count returns topic's reference count (0 if absent).
func (t *subSet) count(topic []byte) int {
	if c := t.counts[string(topic)]; c != nil {
		return *c
	}
	return 0
}

// add increments topic's count and reports whether the topic is new.
func (t *subSet) add(topic []byte) bool {
	if c := t.counts[string(topic)]; c != nil {
		*c++
		return false
	}
	if t.counts == nil {
		t.counts = make(map[string]*int)
		t.nlen = make(map[int]int)
	}
	c := new(int)
	*c = 1
	t.counts[string(topic)] = c
	n := len(topic)
	t.nlen[n]++
	if t.nlen[n] == 1 {
		i, _ := slices.BinarySearch(t.lens, n)
		t.lens = slices.Insert(t.lens, i, n)
	}
	return true
}

// remove decrements topic's count. It reports whether the topic was
// present and whether it is now gone; removing an absent topic changes
// nothing.
func (t *subSet) remove(topic []byte) (present, gone bool) {
	c := t.counts[string(topic)]
	if c == nil {
		return false, false
	}
	if *c--; *c > 0 {
		return true, false
	}
	delete(t.counts, string(topic))
	n := len(topic)
	if t.nlen[n]--; t.nlen[n] == 0 {
		delete(t.nlen, n)
		if i, ok := slices.BinarySearch(t.lens, n); ok {
			t.lens = slices.Delete(t.lens, i, i+1)
		}
	}
	return true, true
}

// match reports whether a prefix of b is in the set.
func (t *subSet) match(b []byte) bool {
	for _, n := range t.lens {
		if n > len(b) {
			return false
		}
		if _, ok := t.counts[string(b[:n])]; ok {
			return true
		}
	}
	return false
}

// subTable is a subSet that concurrent matchers read while one writer at a
// time changes it (callers serialise writers). Small tables are published
// as an immutable snapshot, so the common case matches without a lock;
// larger ones are matched under a read lock. Every change is O(1)
// amortised: no change copies the table.
type subTable struct {
	mu   sync.RWMutex
	set  subSet // guarded by mu
	view atomic.Pointer[subView]
}

// subView is what matchers see: the prefixes of a table with at most
// smallSubs of them, or big for a larger one. A nil view is an empty
// table.
type subView struct {
	prefixes []string
	big      bool
}

var bigView = &subView{big: true}

// match reports whether b starts with one of the table's prefixes. It is
// safe to call concurrently with changes, and on a nil table (which
// matches nothing).
func (t *subTable) match(b []byte) bool {
	if t == nil {
		return false
	}
	v := t.view.Load()
	if v == nil {
		return false
	}
	if !v.big {
		for _, p := range v.prefixes {
			if len(b) >= len(p) && string(b[:len(p)]) == p {
				return true
			}
		}
		return false
	}
	t.mu.RLock()
	ok := t.set.match(b)
	t.mu.RUnlock()
	return ok
}

// add increments topic's count and reports whether the topic is new. A
// new topic that would take the table past limit distinct prefixes (if
// limit > 0) is refused: ok is false and nothing changes.
func (t *subTable) add(topic []byte, limit int) (isNew, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if limit > 0 && t.set.len() >= limit && t.set.count(topic) == 0 {
		return false, false
	}
	if isNew = t.set.add(topic); isNew {
		t.publish()
	}
	return isNew, true
}

// remove decrements topic's count; see subSet.remove.
func (t *subTable) remove(topic []byte) (present, gone bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if present, gone = t.set.remove(topic); gone {
		t.publish()
	}
	return present, gone
}

// publish makes the set's current state visible to matchers (mu held for
// writing). A snapshot is built only while the set is small, so it costs
// at most smallSubs entries.
func (t *subTable) publish() {
	switch n := t.set.len(); {
	case n == 0:
		t.view.Store(nil)
	case n > smallSubs:
		if t.view.Load() != bigView {
			t.view.Store(bigView)
		}
	default:
		ps := make([]string, 0, n)
		for k := range t.set.counts {
			ps = append(ps, k)
		}
		t.view.Store(&subView{prefixes: ps})
	}
}

// each calls fn for every prefix and its reference count, under the read
// lock: fn must not change the table.
func (t *subTable) each(fn func(topic string, n int)) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for k, c := range t.set.counts {
		fn(k, *c)
	}
}

// topics returns the table's prefixes (a copy).
func (t *subTable) topics() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ts := make([]string, 0, len(t.set.counts))
	for k := range t.set.counts {
		ts = append(ts, k)
	}
	return ts
}

// len returns the number of distinct prefixes.
func (t *subTable) len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.set.len()
}
