package coalesce

// Change is how a key's latest state differs from what a reader of the
// queue was last told about it.
type Change int

// The changes Known.Apply reports.
const (
	Unchanged Change = iota // nothing to tell
	Added                   // present, and unknown to the reader
	Updated                 // present, known, and different
	Removed                 // gone, and known to the reader
)

// Known is what a reader of a Queue has been told: the last value of each
// key it saw as present. It turns a stream of coalesced states into
// added/updated/removed changes. It is not safe for concurrent use.
type Known[K comparable, V any] struct {
	seen  map[K]V
	equal func(a, b V) bool
}

// NewKnown returns an empty Known; equal decides whether a present key's
// new value is an update.
func NewKnown[K comparable, V any](equal func(a, b V) bool) *Known[K, V] {
	return &Known[K, V]{seen: make(map[K]V), equal: equal}
}

// Apply records key's latest state (its value v if present) and returns
// the change to tell the reader, with the value the reader knew before
// (what a Removed change is about).
func (k *Known[K, V]) Apply(key K, v V, present bool) (Change, V) {
	prev, had := k.seen[key]
	switch {
	case present && !had:
		k.seen[key] = v
		return Added, prev
	case present && !k.equal(prev, v):
		k.seen[key] = v
		return Updated, prev
	case !present && had:
		delete(k.seen, key)
		return Removed, prev
	}
	return Unchanged, prev
}
