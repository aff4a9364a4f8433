package socket

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestMsgRing runs random puts, gets and drops against a plain slice.
func TestMsgRing(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const limit = 300
	var r msgRing
	var model []string
	next := 0
	for step := range 50000 {
		switch k := rng.IntN(10); {
		case k < 5 && len(model) < limit:
			s := strconv.Itoa(next)
			next++
			r.put(NewMsgString(s), limit)
			model = append(model, s)
		case k < 9 && len(model) > 0:
			if got := string(r.get().Frames[0]); got != model[0] {
				t.Fatalf("step %d: got %s, want %s", step, got, model[0])
			}
			model = model[1:]
		case k == 9:
			n := rng.IntN(4)
			if got, want := r.dropNewest(n), min(n, len(model)); got != want {
				t.Fatalf("step %d: dropped %d, want %d", step, got, want)
			}
			model = model[:len(model)-min(n, len(model))]
		}
		if r.n != len(model) || len(r.buf) > limit {
			t.Fatalf("step %d: %d queued (model %d), buffer %d (limit %d)", step, r.n, len(model), len(r.buf), limit)
		}
	}
}
