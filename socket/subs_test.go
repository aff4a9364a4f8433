package socket

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

func TestSubTable(t *testing.T) {
	var nilTable *subTable
	if nilTable.match([]byte("x")) {
		t.Fatal("nil table matched")
	}
	var l subTable
	if l.match([]byte("x")) {
		t.Fatal("empty table matched")
	}
	// Grow past the linear-scan size and compare with a plain scan.
	var topics [][]byte
	for i := range 40 {
		topics = append(topics, []byte(fmt.Sprintf("t%d.", i*7)))
	}
	topics = append(topics, []byte("abc"), []byte("abcdef"))
	for _, tp := range topics {
		if added, ok := l.add(tp, 0); !added || !ok {
			t.Fatalf("%q not new", tp)
		}
	}
	if added, _ := l.add([]byte("abc"), 0); added {
		t.Fatal("duplicate reported new")
	}
	check := func() {
		t.Helper()
		for _, msg := range []string{"t0.x", "t7.", "t8.", "t14", "abc", "abcd", "abcdefg", "ab", "", "t280.y", "t273.z"} {
			want := false
			for _, p := range l.topics() {
				if bytes.HasPrefix([]byte(msg), []byte(p)) {
					want = true
				}
			}
			if got := l.match([]byte(msg)); got != want {
				t.Fatalf("match(%q) = %v, want %v", msg, got, want)
			}
		}
	}
	check()
	if present, gone := l.remove([]byte("abc")); !present || gone || !l.match([]byte("abcx")) {
		t.Fatal("refcount: first remove dropped the topic")
	}
	if _, gone := l.remove([]byte("abc")); !gone || l.match([]byte("abcx")) {
		t.Fatal("second remove kept the topic")
	}
	check()
	l.add(nil, 0)
	if !l.match([]byte("anything")) {
		t.Fatal("empty prefix does not match everything")
	}
	n := l.len()
	if present, gone := l.remove([]byte("absent")); present || gone || l.len() != n {
		t.Fatal("removing an absent topic changed the table")
	}
	// The limit refuses new topics only.
	if _, ok := l.add([]byte("new"), n); ok {
		t.Fatal("limit not applied")
	}
	if _, ok := l.add([]byte("abcdef"), n); !ok {
		t.Fatal("limit refused a known topic")
	}
	// As a set: adding again keeps one.
	var set subTable
	if isNew, _ := set.addOnce([]byte("s"), 0); !isNew {
		t.Fatal("addOnce: not new")
	}
	if isNew, _ := set.addOnce([]byte("s"), 0); isNew || set.set.count([]byte("s")) != 1 {
		t.Fatal("addOnce counted a repeat")
	}
	if _, gone := set.remove([]byte("s")); !gone || set.match([]byte("s")) {
		t.Fatal("one remove did not empty the set")
	}
}

// TestSubTableModel changes a table at random, growing it past the
// linear-scan size and the index's first sizes and shrinking it back (so
// the index grows, fills with tombstones, is rebuilt and shrinks), and
// checks every state against a plain model.
func TestSubTableModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var l subTable
	model := map[string]int{}
	var universe []string
	for i := range 300 {
		p := fmt.Sprintf("%x", i*7919)
		universe = append(universe, p[:1+i%len(p)], p+".")
	}
	universe = append(universe, "")
	check := func(step int, msg string) {
		t.Helper()
		want := false
		for p := range model {
			if len(msg) >= len(p) && msg[:len(p)] == p {
				want = true
			}
		}
		if got := l.match([]byte(msg)); got != want {
			t.Fatalf("step %d: match(%q) = %v, want %v (%d topics)", step, msg, got, want, len(model))
		}
	}
	for step := range 20000 {
		addPct := 70 // grow, then shrink, then grow...
		if (step/2500)%2 == 1 {
			addPct = 30
		}
		topic := universe[rng.IntN(len(universe))]
		if rng.IntN(100) < addPct {
			isNew, _ := l.add([]byte(topic), 0)
			if isNew != (model[topic] == 0) {
				t.Fatalf("step %d: add %q new=%v, model count %d", step, topic, isNew, model[topic])
			}
			model[topic]++
		} else {
			present, gone := l.remove([]byte(topic))
			if present != (model[topic] > 0) || gone != (model[topic] == 1) {
				t.Fatalf("step %d: remove %q = %v %v, model count %d", step, topic, present, gone, model[topic])
			}
			if model[topic]--; model[topic] <= 0 {
				delete(model, topic)
			}
		}
		if l.len() != len(model) {
			t.Fatalf("step %d: %d topics, model %d", step, l.len(), len(model))
		}
		check(step, topic+"tail")
		check(step, universe[rng.IntN(len(universe))]+"x")
		check(step, "zz")
	}
	var lens []int
	for p := range model {
		if !slices.Contains(lens, len(p)) {
			lens = append(lens, len(p))
		}
	}
	slices.Sort(lens)
	if !slices.Equal(lens, *l.lens.Load()) {
		t.Fatalf("lengths %v, want %v", *l.lens.Load(), lens)
	}
}

// TestSubTableConcurrentMatch runs matchers while a writer churns across
// the small/large boundary and through index rebuilds (for the race
// detector), and checks that a prefix that is never removed always
// matches and one never added never does.
func TestSubTableConcurrentMatch(t *testing.T) {
	var l subTable
	l.add([]byte("keep."), 0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if !l.match([]byte("keep.me")) || l.match([]byte("none")) {
					panic("wrong match during changes")
				}
				l.match([]byte("t5.x"))
			}
		}()
	}
	for round := range 20 {
		for i := range 200 {
			l.add([]byte(fmt.Sprintf("t%d.", i)), 0)
		}
		for i := range 200 {
			l.remove([]byte(fmt.Sprintf("t%d.", (i+round)%200)))
		}
	}
	close(stop)
	wg.Wait()
}

// TestSubTableManyLengths checks matching with prefixes of many distinct
// lengths (the incrementally hashed path) against a plain scan.
func TestSubTableManyLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "ab"[rng.IntN(2)]
		}
		return string(b)
	}
	var l subTable
	var prefixes []string
	for n := 1; n <= 40; n++ {
		if n%3 == 0 {
			continue // leave gaps between lengths
		}
		p := word(n)
		prefixes = append(prefixes, p)
		if _, ok := l.add([]byte(p), 0); !ok {
			t.Fatal("add refused")
		}
	}
	matched := 0
	for i := range 20000 {
		msg := word(rng.IntN(50))
		want := false
		for _, p := range prefixes {
			if len(msg) >= len(p) && msg[:len(p)] == p {
				want = true
			}
		}
		if got := l.match([]byte(msg)); got != want {
			t.Fatalf("message %d: match(%q) = %v, want %v", i, msg, got, want)
		}
		if want {
			matched++
		}
	}
	if matched == 0 || matched == 20000 {
		t.Fatalf("%d of 20000 messages matched: the test checks nothing", matched)
	}
}
