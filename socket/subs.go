package socket

import (
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
)

// smallSubs is the number of distinct prefixes up to which matching scans
// them one by one instead of looking them up by length.
const smallSubs = 4

// subEntry is one distinct prefix and its reference count.
type subEntry struct {
	key string // immutable
	n   int    // reference count (> 0); owned by the set's writer
}

// subSet is a mutable set of subscription prefixes with reference counts.
// A change costs one map update; the sorted list of distinct prefix
// lengths is replaced only when a length appears or disappears (a copy of
// at most that many ints), never changed in place, so it may be shared
// with readers. The zero value is an empty set. A subSet is not safe for
// concurrent use.
type subSet struct {
	counts map[string]*subEntry
	nlen   map[int]int // prefix length -> distinct prefixes of that length
	lens   []int       // distinct prefix lengths, ascending; read-only
	newLen bool        // lens was replaced (for subTable.publish)
}

func (t *subSet) len() int { return len(t.counts) }

// count returns topic's reference count (0 if absent).
func (t *subSet) count(topic []byte) int {
	if e := t.counts[string(topic)]; e != nil {
		return e.n
	}
	return 0
}

// add increments topic's count and reports whether the topic is new.
func (t *subSet) add(topic []byte) bool {
	if e := t.counts[string(topic)]; e != nil {
		e.n++
		return false
	}
	if t.counts == nil {
		t.counts = make(map[string]*subEntry)
		t.nlen = make(map[int]int)
	}
	e := &subEntry{key: string(topic), n: 1}
	t.counts[e.key] = e
	n := len(topic)
	if t.nlen[n]++; t.nlen[n] == 1 {
		i, _ := slices.BinarySearch(t.lens, n)
		t.lens = slices.Insert(slices.Clip(t.lens), i, n) // a new array
		t.newLen = true
	}
	return true
}

// remove decrements topic's count. It reports whether the topic was
// present and whether it is now gone. Removing an absent topic changes
// nothing.
func (t *subSet) remove(topic []byte) (present, gone bool) {
	e := t.counts[string(topic)]
	if e == nil {
		return false, false
	}
	if e.n--; e.n > 0 {
		return true, false
	}
	delete(t.counts, e.key)
	n := len(topic)
	if t.nlen[n]--; t.nlen[n] == 0 {
		delete(t.nlen, n)
		if i, ok := slices.BinarySearch(t.lens, n); ok {
			t.lens = slices.Concat(t.lens[:i], t.lens[i+1:]) // a new array
			t.newLen = true
		}
	}
	return true, true
}

// subTable is a subSet that concurrent matchers read while one writer at a
// time changes it. Matching takes no lock: a table of at most smallSubs
// prefixes is published as an immutable list scanned linearly; a larger
// one is looked up, one probe per distinct prefix length, in subIndex, a
// hash set whose slots are changed in place with atomic stores. Every
// change is O(1) amortised: nothing is copied per change except, when a
// prefix length appears or disappears, the list of lengths.
type subTable struct {
	mu   sync.Mutex // serialises changes; guards set and used
	set  subSet
	used int // index slots holding an entry or a tombstone

	view atomic.Pointer[subView]  // nil: empty table
	idx  atomic.Pointer[subIndex] // all prefixes
	lens atomic.Pointer[[]int]    // set.lens as of the last change
}

// subView is what matchers see first: the prefixes of a table with at
// most smallSubs of them, or big to say "use the index".
type subView struct {
	prefixes []string
	big      bool
}

var bigView = &subView{big: true}

// subIndex is an open-addressing hash set of entries (linear probing).
// Readers probe without locks; the writer changes slots with atomic
// stores: an entry goes into a free or tombstone slot, a removed entry
// becomes a tombstone. At least a quarter of the slots stay free, so every
// probe sequence ends.
type subIndex struct {
	seed  maphash.Seed
	mask  uint64
	slots []atomic.Pointer[subEntry]
}

var tombstone = &subEntry{}

func newSubIndex(size int) *subIndex {
	c := 16
	for c < size {
		c *= 2
	}
	return &subIndex{seed: maphash.MakeSeed(), mask: uint64(c - 1), slots: make([]atomic.Pointer[subEntry], c)}
}

// has reports whether b, whose hash is h, is in x.
func (x *subIndex) has(b []byte, h uint64) bool {
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		e := x.slots[i].Load()
		if e == nil {
			return false
		}
		if e != tombstone && e.key == string(b) {
			return true
		}
	}
}

// insert puts e, which is not in x, into a free or tombstone slot and
// reports whether the slot was free.
func (x *subIndex) insert(e *subEntry) bool {
	for i := maphash.String(x.seed, e.key) & x.mask; ; i = (i + 1) & x.mask {
		switch x.slots[i].Load() {
		case nil:
			x.slots[i].Store(e)
			return true
		case tombstone:
			x.slots[i].Store(e)
			return false
		}
	}
}

// delete replaces e, which is in x, with a tombstone.
func (x *subIndex) delete(e *subEntry) {
	for i := maphash.String(x.seed, e.key) & x.mask; ; i = (i + 1) & x.mask {
		if x.slots[i].Load() == e {
			x.slots[i].Store(tombstone)
			return
		}
	}
}

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
	x := t.idx.Load()
	lens := *t.lens.Load()
	if len(lens) <= streamLens {
		for _, n := range lens {
			if n > len(b) {
				return false
			}
			if x.has(b[:n], maphash.Bytes(x.seed, b[:n])) {
				return true
			}
		}
		return false
	}
	// Many prefix lengths: hash the message once, as it goes, instead of
	// every prefix from its start (which costs the square of its length
	// when a peer subscribes to prefixes of every length).
	var h maphash.Hash
	h.SetSeed(x.seed)
	done := 0
	for _, n := range lens {
		if n > len(b) {
			return false
		}
		h.Write(b[done:n])
		done = n
		if x.has(b[:n], h.Sum64()) {
			return true
		}
	}
	return false
}

// streamLens is the number of distinct prefix lengths above which match
// hashes the message incrementally.
const streamLens = 8

// add increments topic's count and reports whether the topic is new. A
// new topic that would take the table past limit distinct prefixes (if
// limit > 0) is refused: ok is false and nothing changes.
func (t *subTable) add(topic []byte, limit int) (isNew, ok bool) {
	return t.put(topic, limit, false)
}

// addOnce is add for a table used as a set: adding a topic it holds
// changes nothing (its count stays 1).
func (t *subTable) addOnce(topic []byte, limit int) (isNew, ok bool) {
	return t.put(topic, limit, true)
}

func (t *subTable) put(topic []byte, limit int, once bool) (isNew, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.set.count(topic)
	if n > 0 && once {
		return false, true
	}
	if limit > 0 && n == 0 && t.set.len() >= limit {
		return false, false
	}
	if !t.set.add(topic) {
		return false, true
	}
	e := t.set.counts[string(topic)]
	x := t.idx.Load()
	if x == nil || 4*(t.used+1) > 3*len(x.slots) {
		t.rebuild() // the new entry is in set: rebuild indexes it
	} else if x.insert(e) {
		t.used++
	}
	t.publish()
	return true, true
}

// remove decrements topic's count. It reports whether the topic was
// present and whether it is now gone; removing an absent topic changes
// nothing.
func (t *subTable) remove(topic []byte) (present, gone bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.set.counts[string(topic)]
	if present, gone = t.set.remove(topic); !gone {
		return present, false
	}
	x := t.idx.Load()
	x.delete(e)
	if n := t.set.len(); len(x.slots) > 16 && 8*n < len(x.slots) {
		t.rebuild() // mostly empty: shrink
	}
	t.publish()
	return true, true
}

// rebuild replaces the index with a fresh one holding the set's entries
// and no tombstones, at most half full (mu held). Growing when the index
// is three quarters used and shrinking when it is less than an eighth
// full keep its cost O(1) amortised per change.
func (t *subTable) rebuild() {
	x := newSubIndex(2 * t.set.len())
	for _, e := range t.set.counts {
		x.insert(e)
	}
	t.used = t.set.len()
	t.idx.Store(x)
}

// publish makes the set's current state visible to matchers (mu held):
// lengths first, so that a matcher that sees the new view also sees the
// lengths it needs. A snapshot of the prefixes is built only while the set
// is small, so it costs at most smallSubs entries.
func (t *subTable) publish() {
	if t.set.newLen || t.lens.Load() == nil {
		lens := t.set.lens
		t.lens.Store(&lens)
		t.set.newLen = false
	}
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

// each calls fn for every prefix and its reference count, under the
// table's lock: fn must not change the table.
func (t *subTable) each(fn func(topic string, n int)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.set.counts {
		fn(k, e.n)
	}
}

// topics returns the table's prefixes (a copy).
func (t *subTable) topics() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	ts := make([]string, 0, len(t.set.counts))
	for k := range t.set.counts {
		ts = append(ts, k)
	}
	return ts
}

// len returns the number of distinct prefixes.
func (t *subTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.set.len()
}
