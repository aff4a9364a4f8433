package coalesce

import "testing"

func TestLatestValuePerKeyInFirstPendingOrder(t *testing.T) {
	q := New[string, int]()
	if _, _, ok := q.Take(); ok {
		t.Fatal("Take on an empty queue")
	}
	q.Put("a", 1)
	q.Put("b", 2)
	q.Put("a", 3) // replaces a's value, keeps a's place
	select {
	case <-q.Ready():
	default:
		t.Fatal("Put did not signal Ready")
	}
	for _, want := range []struct {
		k string
		v int
	}{{"a", 3}, {"b", 2}} {
		k, v, ok := q.Take()
		if !ok || k != want.k || v != want.v {
			t.Fatalf("Take = %q %d %v, want %q %d", k, v, ok, want.k, want.v)
		}
	}
	if _, _, ok := q.Take(); ok {
		t.Fatal("values left after taking every key")
	}
	q.Put("a", 4) // a key taken before may be pending again
	if k, v, _ := q.Take(); k != "a" || v != 4 {
		t.Fatalf("Take = %q %d", k, v)
	}
}

func TestPutNeverBlocks(t *testing.T) {
	q := New[int, int]()
	for i := 0; i < 1000; i++ {
		q.Put(i%10, i) // nobody takes: bounded by 10 keys
	}
	n := 0
	for {
		if _, _, ok := q.Take(); !ok {
			break
		}
		n++
	}
	if n != 10 {
		t.Fatalf("%d values pending for 10 keys", n)
	}
}

func TestKnown(t *testing.T) {
	k := NewKnown[string, int](func(a, b int) bool { return a == b })
	for i, c := range []struct {
		key     string
		v       int
		present bool
		want    Change
		prev    int
	}{
		{"a", 1, false, Unchanged, 0}, // never told of it: nothing to remove
		{"a", 1, true, Added, 0},
		{"a", 1, true, Unchanged, 1},
		{"a", 2, true, Updated, 1},
		{"b", 7, true, Added, 0},
		{"a", 0, false, Removed, 2},
		{"a", 0, false, Unchanged, 0},
		{"a", 3, true, Added, 0},
		{"b", 0, false, Removed, 7},
	} {
		got, prev := k.Apply(c.key, c.v, c.present)
		if got != c.want || (got == Removed || got == Updated) && prev != c.prev {
			t.Fatalf("step %d: Apply(%q, %d, %v) = %v, %d; want %v, %d", i, c.key, c.v, c.present, got, prev, c.want, c.prev)
		}
	}
}
