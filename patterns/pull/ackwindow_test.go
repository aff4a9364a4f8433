package pull

import (
	"log/slog"
	"math/rand/v2"
	"testing"
)

// ackModel is the reference an ackWindow is checked against: the set of
// acknowledged offsets, and the floor as the first offset from base on that
// is not in it.
type ackModel struct {
	base  uint64
	acked map[uint64]bool
}

func (m *ackModel) floor() uint64 {
	f := m.base
	for m.acked[f] {
		f++
	}
	return f
}

// TestAckWindowMatchesModel acknowledges delivered offsets in random order,
// some twice and some below the floor, with resets in between, and checks
// the floor after every step against the reference.
func TestAckWindowMatchesModel(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0xac4))
		var w ackWindow
		base := rng.Uint64N(1 << 40)
		w.reset(base)
		m := &ackModel{base: base, acked: map[uint64]bool{}}
		for round := 0; round < 3; round++ {
			n := 1 + rng.IntN(300)
			order := rng.Perm(n)
			for i, k := range order {
				offs := []uint64{base + uint64(k)}
				switch rng.IntN(10) {
				case 0: // a duplicate of an earlier ack
					if i > 0 {
						offs = append(offs, base+uint64(order[rng.IntN(i)]))
					}
				case 1: // an ack from below the window's start
					if base > 0 {
						offs = append(offs, base-1-rng.Uint64N(min(base, 5)))
					}
				}
				for _, off := range offs {
					w.ack(off)
					if off >= m.base {
						m.acked[off] = true
					}
					if got, want := w.floor(), m.floor(); got != want {
						t.Fatalf("seed %d round %d step %d: ack %d: floor %d, want %d", seed, round, i, off, got, want)
					}
				}
			}
			if got, want := w.floor(), base+uint64(n); got != want {
				t.Fatalf("seed %d round %d: floor %d after acking all %d, want %d", seed, round, got, n, want)
			}
			if len(w.ahead) != 0 {
				t.Fatalf("seed %d round %d: %d offsets kept above a complete prefix", seed, round, len(w.ahead))
			}
			// A reset moves the window anywhere, backwards included, and
			// forgets every ack.
			base = rng.Uint64N(1 << 40)
			w.reset(base)
			m = &ackModel{base: base, acked: map[uint64]bool{}}
			if w.floor() != base {
				t.Fatalf("seed %d: floor %d after reset to %d", seed, w.floor(), base)
			}
		}
	}
}

// TestAckWindowGapHoldsFloor checks that one missing ack holds the floor
// however many later offsets are acknowledged, and that filling it moves
// the floor past all of them at once.
func TestAckWindowGapHoldsFloor(t *testing.T) {
	var w ackWindow
	w.reset(10)
	for off := uint64(11); off < 100; off++ {
		w.ack(off)
	}
	if w.floor() != 10 {
		t.Fatalf("floor %d with offset 10 unacknowledged, want 10", w.floor())
	}
	w.ack(10)
	if w.floor() != 100 {
		t.Fatalf("floor %d after filling the gap, want 100", w.floor())
	}
}

// TestAckWindowCrossesSkippedOffsets checks that offsets recorded as
// skipped (a gap in the publisher's log) never hold the floor: it passes
// over them as soon as it reaches them, whether the gap is recorded before
// or after the acks below it.
func TestAckWindowCrossesSkippedOffsets(t *testing.T) {
	var w ackWindow
	w.reset(0)
	w.skip(10, 20) // above the floor: remembered
	w.skip(30, 35)
	for off := uint64(0); off < 10; off++ {
		w.ack(off)
	}
	if w.floor() != 20 {
		t.Fatalf("floor %d after acking up to a gap, want 20", w.floor())
	}
	for off := uint64(21); off < 30; off++ {
		w.ack(off)
	}
	if w.floor() != 20 {
		t.Fatalf("floor %d with offset 20 unacknowledged, want 20", w.floor())
	}
	w.ack(20)
	if w.floor() != 35 {
		t.Fatalf("floor %d after filling up to the second gap, want 35", w.floor())
	}
	w.skip(35, 40) // at the floor: crossed at once
	w.skip(38, 39) // inside what is crossed: nothing to keep
	if w.floor() != 40 || len(w.skips) != 0 {
		t.Fatalf("floor %d with %d gaps kept, want 40 and none", w.floor(), len(w.skips))
	}
	w.reset(100)
	w.skip(101, 105)
	w.reset(0)
	if len(w.skips) != 0 {
		t.Fatal("reset kept a gap")
	}
}

// TestResetKeepsFloorUnderDeliveredRecords proves a position reset that
// moves above the acknowledged floor (a diverged log cut below what was
// fetched, an out-of-range move past retention) never lets the committable
// floor pass records delivered before it and not yet acknowledged: their
// acks still move it, and the reset's own records follow. (The floor used
// to jump to the new position at once, so a commit could pass records the
// caller had not written out yet, lost by a kill.)
func TestResetKeepsFloorUnderDeliveredRecords(t *testing.T) {
	lg := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name  string
		reset func(c *Consumer, ps *pubState)
		next  uint64 // first offset of the reset's generation
		after uint64 // the floor once the old generation's records are acknowledged
	}{
		{"diverged", func(c *Consumer, ps *pubState) {
			c.diverged(lg, ps, 30, Reply{Status: StatusDiverged, Next: 25, High: 40})
		}, 25, 25},
		{"out of range", func(c *Consumer, ps *pubState) {
			c.resetToOldest(lg, ps, 30, Reply{Status: StatusOutOfRange, Oldest: 50, High: 60})
		}, 50, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Consumer{pubs: map[string]*pubState{}, log: lg}
			ps := &pubState{name: "p", posKnown: true}
			ps.acks.reset(10)
			c.pubs["p"] = ps
			old := ps.gen
			// Records 10..29 were delivered; 12 and 20 are acknowledged.
			c.Ack(Message{Publisher: "p", Offset: 12, gen: old})
			c.Ack(Message{Publisher: "p", Offset: 20, gen: old})
			tc.reset(c, ps)
			if f := ps.acks.floor(); f != 10 {
				t.Fatalf("floor %d after the reset, want 10: it passed delivered records not acknowledged", f)
			}
			for off := uint64(10); off < 30; off++ {
				c.Ack(Message{Publisher: "p", Offset: off, gen: old})
			}
			if f := ps.acks.floor(); f != tc.after {
				t.Fatalf("floor %d once the old records are acknowledged, want %d", f, tc.after)
			}
			c.Ack(Message{Publisher: "p", Offset: tc.next, gen: ps.gen})
			if f := ps.acks.floor(); f != tc.next+1 {
				t.Fatalf("floor %d after the reset's first record, want %d", f, tc.next+1)
			}
		})
	}
}
