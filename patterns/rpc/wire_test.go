package rpc

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func TestRPCWireRoundTrip(t *testing.T) {
	for _, r := range []request{
		{id: 1, clientID: []byte("c")},
		{id: 1<<64 - 1, timeout: 2 * time.Second, clientID: bytes.Repeat([]byte("x"), MaxClientID), key: []byte("k")},
		{id: 7, clientID: []byte("client"), key: bytes.Repeat([]byte("k"), MaxKey)},
	} {
		b := appendRequest(nil, r)
		got, err := decodeRequest(b)
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if got.id != r.id || got.timeout != r.timeout || !bytes.Equal(got.clientID, r.clientID) || !bytes.Equal(got.key, r.key) || (got.key == nil) != (r.key == nil) {
			t.Fatalf("round trip %+v -> %+v", r, got)
		}
		// Every truncation is refused.
		for i := range len(b) {
			if _, err := decodeRequest(b[:i]); err == nil {
				t.Fatalf("%+v truncated to %d decoded", r, i)
			}
		}
	}
	h := appendReply(nil, 42, StatusOverloaded)
	if id, st, err := decodeReply(h); err != nil || id != 42 || st != StatusOverloaded {
		t.Fatalf("reply: %d %v %v", id, st, err)
	}
	if _, err := decodeRequest([]byte("hello")); err != errNotFastMQ {
		t.Fatalf("plain body: %v", err)
	}
}

func TestRPCReplyCacheExpiresAndBounds(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newReplyCache(time.Second, 2)
	for i, k := range []string{"a", "b", "c"} {
		key := cacheKey{"cl", k}
		c.start(key)
		c.finish(key, StatusOK, [][]byte{[]byte(k)}, now.Add(time.Duration(i)*time.Millisecond))
	}
	if _, ok := c.get(cacheKey{"cl", "a"}, now); ok || c.len() != 2 {
		t.Fatalf("oldest entry kept beyond the size cap: len %d", c.len())
	}
	if e, ok := c.get(cacheKey{"cl", "c"}, now); !ok || !e.done {
		t.Fatal("newest entry lost")
	}
	if _, ok := c.get(cacheKey{"cl", "c"}, now.Add(2*time.Second)); ok {
		t.Fatal("entry kept past its window")
	}
	k := cacheKey{"cl", "run"}
	c.start(k)
	if w := c.abandon(k); w != nil || c.len() != 1 {
		t.Fatalf("abandon: %v, len %d", w, c.len())
	}
}

// FuzzDecodeRequest: the decoder never panics, never accepts what it
// cannot re-encode identically, and refuses oversized fields.
func FuzzDecodeRequest(f *testing.F) {
	f.Add(appendRequest(nil, request{id: 1, timeout: time.Second, clientID: []byte("c"), key: []byte("k")}))
	f.Add(appendRequest(nil, request{id: 2, clientID: []byte("client")}))
	f.Add([]byte("FMQ\x01Q"))
	f.Add([]byte("hello"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRequest(b)
		if err != nil {
			return
		}
		if len(r.clientID) == 0 || len(r.clientID) > MaxClientID || len(r.key) > MaxKey {
			t.Fatalf("accepted out-of-range fields: %+v", r)
		}
		if again := appendRequest(nil, r); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding %q gives %q", b, again)
		}
	})
}

// FuzzSplitEnvelope: any frames split into an envelope ending with the
// delimiter and the rest, or are refused.
func FuzzSplitEnvelope(f *testing.F) {
	f.Add([]byte("id\x00\x00hdr\x00body"))
	f.Add([]byte("\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		frames := bytes.Split(b, []byte{0})
		for i := range frames {
			if len(frames[i]) == 1 && frames[i][0] == 'E' {
				frames[i] = nil // empty frames
			}
		}
		env, body, ok := splitEnvelope(frames)
		if !ok {
			return
		}
		if len(env) < 2 || len(env[len(env)-1]) != 0 || len(env)+len(body) != len(frames) {
			t.Fatalf("split %q into %q and %q", frames, env, body)
		}
		_, _ = decodeRequest(append([]byte(nil), frames[len(env)-1]...))
	})
}

// A Histogram's JSON carries its buckets' bounds beside the counts, and
// reads back.
func TestHistogramJSON(t *testing.T) {
	var h Histogram
	h.observe(300 * time.Microsecond)
	h.observe(10 * time.Second)
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Counts []uint64 `json:"counts"`
		Sum    int64    `json:"sum_ns"`
		LE     []int64  `json:"le_ns"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.LE) != len(LatencyBuckets) || raw.LE[2] != int64(500*time.Microsecond) || len(raw.Counts) != len(LatencyBuckets)+1 ||
		raw.Counts[2] != 1 || raw.Counts[len(LatencyBuckets)] != 1 || raw.Sum != int64(h.Sum) {
		t.Fatalf("histogram JSON %s", b)
	}
	var back Histogram
	if err := json.Unmarshal(b, &back); err != nil || back != h {
		t.Fatalf("read back %+v, %v; want %+v", back, err, h)
	}
}
