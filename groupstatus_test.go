package fastmq_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
)

// TestStatusGroups: /status lists the node's consumer groups with what a
// member did (acknowledged, dead-lettered, in flight, lag), in snake_case,
// and /metrics exports them per stream and group.
func TestStatusGroups(t *testing.T) {
	n := newNode(t, "gst")
	publish(t, n, "s", 5)
	m, err := n.Group(fastmq.GroupConfig{Stream: "s", Group: "w", Member: group.MemberConfig{Buffer: 1, MaxAckPending: 2}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 2; i++ {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			err = msg.Ack(ctx)
		} else {
			err = msg.Term(ctx, "bad")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "the dead letter in the status", 0, func() bool {
		st := n.Status()
		return len(st.Groups) == 1 && st.Groups[0].DeadLettered == 1
	})
	srv := httptest.NewServer(nodeHTTP(n))
	defer srv.Close()
	get := func(path string) []byte {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	var st struct {
		Groups []map[string]any `json:"groups"`
	}
	b := get("/status")
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Groups) != 1 {
		t.Fatalf("groups in %s", b)
	}
	g := st.Groups[0]
	for k, want := range map[string]any{"stream": "s", "group": "w", "acked": 1.0, "dead_letters": 1.0, "dead_lettered": 1.0,
		"lag_records": 3.0, "floor": 2.0, "high": 5.0} {
		if g[k] != want {
			t.Errorf("group %s = %v, want %v", k, g[k], want)
		}
	}
	if g["in_flight"].(float64) < 1 || g["lag_time_ns"].(float64) <= 0 || g["delivered"].(float64) < 3 {
		t.Errorf("group %v: want records in flight, a lag time and 3 deliveries or more", g)
	}
	for k := range g {
		if strings.ToLower(k) != k {
			t.Errorf("status key %q is not snake_case", k)
		}
	}
	mt := string(get("/metrics"))
	for _, want := range []string{
		`fastmq_group_acked_total{group="w",stream="s"} 1`,
		`fastmq_group_dead_lettered_total{group="w",stream="s"} 1`,
		`fastmq_group_dead_letter_records{group="w",stream="s"} 1`,
		`fastmq_group_lag_records{group="w",stream="s"} 3`,
		`fastmq_group_in_flight{group="w",stream="s"}`,
		`fastmq_group_lag_seconds{group="w",stream="s"}`,
		`fastmq_group_redelivered_total{group="w",stream="s"} 0`,
		`fastmq_group_naked_total{group="w",stream="s"} 0`,
	} {
		if !strings.Contains(mt, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
