package console

import "time"

// RateWindow is about how far back the per-stream and per-consumer rates of
// a View look.
const RateWindow = 10 * time.Second

// maxSamples caps the charts' history whatever its duration.
const maxSamples = 1200

// Sample is one point of the throughput charts: mesh-wide rates per second
// since the previous gathering, and how many nodes answered.
type Sample struct {
	Time        time.Time `json:"t"`
	AppendRate  float64   `json:"append"`  // records appended to every stream
	DeliverRate float64   `json:"deliver"` // records delivered to consumers
	AckRate     float64   `json:"ack"`     // records acknowledged by consumers
	Up          int       `json:"up"`      // members whose status was had
	Down        int       `json:"down"`    // members failed or unreachable
}

// counters are the monotonic counts of one gathering, by key (see View).
type counters struct {
	t                time.Time
	next, deliv, ack map[string]uint64
	// Consumer groups, keyed "publisher/stream/group".
	gdeliv, gack map[string]uint64
}

// history keeps the recent gatherings' counters (for rates) and the
// charts' samples. Its owner guards it.
type history struct {
	keep    time.Duration
	recent  []counters // oldest first, spanning about RateWindow
	samples []Sample
}

func countersOf(ms MeshStatus) counters {
	c := counters{t: ms.Time, next: map[string]uint64{}, deliv: map[string]uint64{}, ack: map[string]uint64{},
		gdeliv: map[string]uint64{}, gack: map[string]uint64{}}
	for _, m := range ms.Members {
		if m.State == nil || m.Stale {
			continue
		}
		for _, s := range m.State.Streams {
			if s.Error == "" {
				c.next[m.Name+"/"+s.Name] = s.Next
			}
		}
		for _, g := range m.State.Groups {
			k := m.Name + "/" + g.Stream + "/" + g.Group
			c.gdeliv[k], c.gack[k] = g.Delivered, g.Acked
		}
		for _, con := range m.State.Consumers {
			for _, p := range con.Publishers {
				k := m.Name + "/" + con.Name + "/" + con.Stream + "/" + p.Publisher
				c.deliv[k], c.ack[k] = p.Delivered, p.Acked
			}
		}
	}
	return c
}

// rates returns, per key, the growth per second from old to cur; keys
// missing from old, or that went back (a restart), are left out.
func rates(old, cur map[string]uint64, dt time.Duration) map[string]float64 {
	out := make(map[string]float64, len(cur))
	if dt <= 0 {
		return out
	}
	for k, v := range cur {
		if o, ok := old[k]; ok && v >= o {
			out[k] = float64(v-o) / dt.Seconds()
		}
	}
	return out
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// add records a gathering and returns its View.
func (h *history) add(ms MeshStatus) View {
	cur := countersOf(ms)
	v := View{Mesh: ms, AppendRate: map[string]float64{}, DeliverRate: map[string]float64{}, AckRate: map[string]float64{},
		GroupDeliverRate: map[string]float64{}, GroupAckRate: map[string]float64{}}
	if n := len(h.recent); n > 0 {
		prev := h.recent[n-1]
		dt := cur.t.Sub(prev.t)
		s := Sample{Time: cur.t,
			AppendRate:  sum(rates(prev.next, cur.next, dt)),
			DeliverRate: sum(rates(prev.deliv, cur.deliv, dt)),
			AckRate:     sum(rates(prev.ack, cur.ack, dt)),
		}
		for _, m := range ms.Members {
			if m.State != nil && !m.Stale {
				s.Up++
			} else if m.Down && !m.Missing && m.Status != "left" {
				s.Down++
			}
		}
		h.samples = append(h.samples, s)
		// Per-key rates over the window: from the oldest gathering kept.
		old := h.recent[0]
		dt = cur.t.Sub(old.t)
		v.AppendRate = rates(old.next, cur.next, dt)
		v.DeliverRate = rates(old.deliv, cur.deliv, dt)
		v.AckRate = rates(old.ack, cur.ack, dt)
		v.GroupDeliverRate = rates(old.gdeliv, cur.gdeliv, dt)
		v.GroupAckRate = rates(old.gack, cur.gack, dt)
	}
	h.recent = append(h.recent, cur)
	for len(h.recent) > 2 && cur.t.Sub(h.recent[1].t) >= RateWindow {
		h.recent = h.recent[1:]
	}
	for len(h.samples) > 0 && (len(h.samples) > maxSamples || cur.t.Sub(h.samples[0].Time) > h.keep) {
		h.samples = h.samples[1:]
	}
	v.History = append([]Sample(nil), h.samples...)
	return v
}
