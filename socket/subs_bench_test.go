package socket

import (
	"bytes"
	"fmt"
	"testing"
)

// benchTopics returns n distinct topics of similar length.
func benchTopics(n int) [][]byte {
	ts := make([][]byte, n)
	for i := range ts {
		ts[i] = []byte(fmt.Sprintf("topic.%06d.", i))
	}
	return ts
}

// BenchmarkSubscriptionChurn applies maxPeerSubs SUBSCRIBEs and then as
// many CANCELs to one PUB peer's subscriptions, as a flooding subscriber
// would (one op = the whole cycle).
func BenchmarkSubscriptionChurn(b *testing.B) {
	topics := benchTopics(maxPeerSubs)
	var size int64
	for _, t := range topics {
		size += 2 * int64(len(t))
	}
	s := &Socket{kind: Pub}
	b.ReportAllocs()
	b.SetBytes(size)
	for b.Loop() {
		p := &peer{s: s}
		for _, t := range topics {
			if err := p.subscription(true, t); err != nil {
				b.Fatal(err)
			}
		}
		for _, t := range topics {
			if err := p.subscription(false, t); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkSubscriptionMatch measures the PUB hot path: does a message
// match one peer's subscriptions (half the messages do).
func BenchmarkSubscriptionMatch(b *testing.B) {
	for _, n := range []int{1, 4, 8, 100, maxPeerSubs} {
		topics := benchTopics(n)
		p := &peer{s: &Socket{kind: Pub}}
		for _, t := range topics {
			if err := p.subscription(true, t); err != nil {
				b.Fatal(err)
			}
		}
		msgs := [][]byte{
			append(append([]byte(nil), topics[n/2]...), "payload"...),
			[]byte("other.topic.payload"),
		}
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(msgs[0])))
			i := 0
			for b.Loop() {
				if peerMatch(p, msgs[i&1]) != (i&1 == 0) {
					b.Fatal("wrong match")
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("subs=%d/parallel", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(msgs[0])))
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if peerMatch(p, msgs[i&1]) != (i&1 == 0) {
						panic("wrong match")
					}
					i++
				}
			})
		})
	}
}

func peerMatch(p *peer, b []byte) bool { return p.subs.match(b) }

// BenchmarkSubscriptionMatchAllLengths: a peer subscribed to prefixes of
// every length from 1 to 4096, matched against a 4 KiB message that none
// of them matches. Hashing each prefix from its start would cost the
// square of the message length.
func BenchmarkSubscriptionMatchAllLengths(b *testing.B) {
	var l subTable
	for n := 1; n <= 4096; n++ {
		p := bytes.Repeat([]byte{'a'}, n)
		p[n-1] = 'b'
		if _, ok := l.add(p, 0); !ok {
			b.Fatal("add refused")
		}
	}
	msg := bytes.Repeat([]byte{'a'}, 4096)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if l.match(msg) {
			b.Fatal("matched")
		}
	}
}
