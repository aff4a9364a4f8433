package socket

import (
	"bytes"
	"fmt"
	"testing"
)

func TestSubList(t *testing.T) {
	var l *subList
	if l.match([]byte("x")) {
		t.Fatal("nil list matched")
	}
	// Grow past the linear-scan size and compare with a plain scan.
	var topics [][]byte
	for i := range 40 {
		topics = append(topics, []byte(fmt.Sprintf("t%d.", i*7)))
	}
	topics = append(topics, []byte("abc"), []byte("abcdef"))
	for _, tp := range topics {
		var added bool
		l, added = l.add(tp)
		if !added {
			t.Fatalf("%q not new", tp)
		}
	}
	l, added := l.add([]byte("abc"))
	if added {
		t.Fatal("duplicate reported new")
	}
	check := func() {
		t.Helper()
		for _, msg := range []string{"t0.x", "t7.", "t8.", "t14", "abc", "abcd", "abcdefg", "ab", "", "t280.y", "t273.z"} {
			want := false
			for _, p := range l.topics() {
				if bytes.HasPrefix([]byte(msg), p) {
					want = true
				}
			}
			if got := l.match([]byte(msg)); got != want {
				t.Fatalf("match(%q) = %v, want %v", msg, got, want)
			}
		}
	}
	check()
	l, gone := l.remove([]byte("abc"))
	if gone || !l.match([]byte("abcx")) {
		t.Fatal("refcount: first remove dropped the topic")
	}
	l, gone = l.remove([]byte("abc"))
	if !gone || l.match([]byte("abcx")) {
		t.Fatal("second remove kept the topic")
	}
	check()
	l, _ = l.add(nil)
	if !l.match([]byte("anything")) {
		t.Fatal("empty prefix does not match everything")
	}
	if l2, gone := l.remove([]byte("absent")); gone || l2 != l {
		t.Fatal("removing an absent topic changed the list")
	}
}
