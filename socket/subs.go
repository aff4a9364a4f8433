package socket

import (
	"bytes"
	"slices"
)

// subList is an immutable set of subscription prefixes with reference
// counts; changes produce a new list (copy on write) so readers need no
// lock. Matching costs one map lookup per distinct prefix length, so many
// subscriptions of similar length stay cheap.
type subList struct {
	prefixes [][]byte
	counts   []int
	set      map[string]struct{} // the prefixes
	lens     []int               // distinct prefix lengths, ascending
}

func (l *subList) match(b []byte) bool {
	if l == nil {
		return false
	}
	if len(l.prefixes) <= 8 {
		for _, p := range l.prefixes {
			if bytes.HasPrefix(b, p) {
				return true
			}
		}
		return false
	}
	for _, n := range l.lens {
		if n > len(b) {
			return false
		}
		if _, ok := l.set[string(b[:n])]; ok {
			return true
		}
	}
	return false
}

// build fills in the lookup structures of a new list.
func (l *subList) build() *subList {
	if len(l.prefixes) <= 8 {
		return l
	}
	l.set = make(map[string]struct{}, len(l.prefixes))
	seen := make(map[int]bool)
	for _, p := range l.prefixes {
		l.set[string(p)] = struct{}{}
		if !seen[len(p)] {
			seen[len(p)] = true
			l.lens = append(l.lens, len(p))
		}
	}
	slices.Sort(l.lens)
	return l
}

func (l *subList) index(topic []byte) int {
	if l == nil {
		return -1
	}
	if l.set != nil {
		if _, ok := l.set[string(topic)]; !ok {
			return -1
		}
	}
	for i, p := range l.prefixes {
		if bytes.Equal(p, topic) {
			return i
		}
	}
	return -1
}

// add returns the list with topic's count incremented and whether the topic
// is new.
func (l *subList) add(topic []byte) (*subList, bool) {
	n := &subList{}
	if l != nil {
		n.prefixes = append(n.prefixes, l.prefixes...)
		n.counts = append(n.counts, l.counts...)
	}
	if i := n.index(topic); i >= 0 {
		n.counts[i]++
		return n.build(), false
	}
	n.prefixes = append(n.prefixes, bytes.Clone(topic))
	n.counts = append(n.counts, 1)
	return n.build(), true
}

// remove returns the list with topic's count decremented and whether the
// topic disappeared. Removing an absent topic changes nothing.
func (l *subList) remove(topic []byte) (*subList, bool) {
	i := l.index(topic)
	if i < 0 {
		return l, false
	}
	n := &subList{
		prefixes: append([][]byte(nil), l.prefixes...),
		counts:   append([]int(nil), l.counts...),
	}
	n.counts[i]--
	if n.counts[i] > 0 {
		return n.build(), false
	}
	n.prefixes = append(n.prefixes[:i], n.prefixes[i+1:]...)
	n.counts = append(n.counts[:i], n.counts[i+1:]...)
	return n.build(), true
}

func (l *subList) topics() [][]byte {
	if l == nil {
		return nil
	}
	return l.prefixes
}
