package group

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// checkSortKeys sorts keys with sortKeys and checks the result is sorted
// by offset and holds the same keys.
func checkSortKeys(t *testing.T, g *gather, keys []ackKey) {
	t.Helper()
	want := slices.Clone(keys)
	slices.SortStableFunc(want, func(a, b ackKey) int {
		if c := cmpAckKey(a, b); c != 0 {
			return c
		}
		return int(a.i) - int(b.i)
	})
	g.keys = keys
	g.sortKeys()
	if !slices.IsSortedFunc(g.keys, cmpAckKey) {
		t.Fatalf("not sorted: %v", g.keys)
	}
	got := slices.Clone(g.keys)
	slices.SortStableFunc(got, func(a, b ackKey) int {
		if c := cmpAckKey(a, b); c != 0 {
			return c
		}
		return int(a.i) - int(b.i)
	})
	if !slices.Equal(got, want) {
		t.Fatalf("keys changed: got %v, want %v", got, want)
	}
}

func TestSortKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	g := new(gather) // reused, as the pool reuses gathers
	for round := range 300 {
		n := 1 + r.IntN(3000)
		base := r.Uint64N(1 << 40)
		var keys []ackKey
		switch round % 4 {
		case 0: // handlers finishing a little out of order
			for i := range n {
				keys = append(keys, ackKey{off: base + uint64(i), del: 1, i: uint32(i)})
			}
			for i := range keys {
				j := min(len(keys)-1, i+r.IntN(16))
				keys[i], keys[j] = keys[j], keys[i]
			}
		case 1: // several leased ranges with gaps (other members' records)
			off := base
			for i := range n {
				if r.IntN(100) == 0 {
					off += uint64(r.IntN(2 * n))
				}
				keys = append(keys, ackKey{off: off, del: 1, i: uint32(i)})
				off++
			}
			r.Shuffle(len(keys), func(a, b int) { keys[a], keys[b] = keys[b], keys[a] })
		case 2: // far apart: the comparison sort
			for i := range n {
				keys = append(keys, ackKey{off: r.Uint64N(1 << 50), del: 1, i: uint32(i)})
			}
		case 3: // one offset twice (two deliveries)
			for i := range n {
				keys = append(keys, ackKey{off: base + uint64(i), del: 1, i: uint32(i)})
			}
			keys = append(keys, ackKey{off: base + uint64(r.IntN(n)), del: 2, i: uint32(n)})
			r.Shuffle(len(keys), func(a, b int) { keys[a], keys[b] = keys[b], keys[a] })
		}
		checkSortKeys(t, g, keys)
	}
}

// TestSortKeysWholeRange: offsets 0 and MaxUint64 together (a hostile
// or broken publisher's) are sorted, not placed in a span that wraps.
func TestSortKeysWholeRange(t *testing.T) {
	checkSortKeys(t, new(gather), []ackKey{{off: math.MaxUint64, del: 1, i: 0}, {off: 0, del: 1, i: 1}})
}

func FuzzSortKeys(f *testing.F) {
	f.Add([]byte{3, 1, 2, 0, 0, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		var keys []ackKey
		for i, c := range b {
			keys = append(keys, ackKey{off: 1<<40 + uint64(c), del: 1, i: uint32(i)})
		}
		checkSortKeys(t, new(gather), keys)
	})
}

func BenchmarkSortKeys(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]ackKey, 8192)
	for i := range keys {
		keys[i] = ackKey{off: uint64(i) + uint64(i/2048)*4096, del: 1, i: uint32(i)}
	}
	for i := range keys {
		j := min(len(keys)-1, i+r.IntN(16))
		keys[i], keys[j] = keys[j], keys[i]
	}
	g := new(gather)
	work := make([]ackKey, len(keys))
	b.Run("sortKeys", func(b *testing.B) {
		for range b.N {
			copy(work, keys)
			g.keys = work
			g.sortKeys()
		}
	})
	b.Run("SortFunc", func(b *testing.B) { // what it replaced
		for range b.N {
			copy(work, keys)
			slices.SortFunc(work, cmpAckKey)
		}
	})
}
