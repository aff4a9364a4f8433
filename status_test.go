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
	"github.com/fastmq/fastmq/internal/metrics"
	"github.com/fastmq/fastmq/internal/testutil"
)

// TestStatusConsumerCounters: /status reports what Next returned as
// delivered, in snake_case, with the streams' fsync latency; /metrics
// exports the new counters.
func TestStatusConsumerCounters(t *testing.T) {
	n := newNode(t, "st")
	publish(t, n, "s", 5)
	c, err := n.Consume(fastmq.ConsumerConfig{Stream: "s", Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.Next(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "five records fetched", 0, func() bool {
		st := n.Status()
		return len(st.Consumers) == 1 && len(st.Consumers[0].Publishers) == 1 && st.Consumers[0].Publishers[0].Fetched == 5
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
		Streams   []map[string]any `json:"streams"`
		Consumers []struct {
			Publishers []map[string]any `json:"publishers"`
		} `json:"consumers"`
		RPC map[string]any `json:"rpc"`
	}
	b := get("/status")
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Consumers) != 1 || len(st.Consumers[0].Publishers) != 1 || len(st.Streams) != 1 || st.RPC == nil {
		t.Fatalf("status %s", b)
	}
	p := st.Consumers[0].Publishers[0]
	if p["delivered"] != 2.0 || p["fetched"] != 5.0 {
		t.Fatalf("publisher %v: want delivered 2 (what Next returned), fetched 5", p)
	}
	for _, m := range []map[string]any{p, st.Streams[0]} {
		for k := range m {
			if strings.ToLower(k) != k {
				t.Errorf("status key %q is not snake_case", k)
			}
		}
	}
	if f, _ := st.Streams[0]["fsyncs"].(map[string]any); f == nil || f["count"].(float64) < 1 {
		t.Fatalf("stream %v: no fsync observed", st.Streams[0])
	}
	m := string(get("/metrics"))
	for _, want := range []string{
		`fastmq_consumer_delivered_total{consumer="c",publisher="st",stream="s"} 2`,
		`fastmq_consumer_fetched_total{consumer="c",publisher="st",stream="s"} 5`,
		`fastmq_stream_bytes{stream="s"}`,
		`fastmq_spool_fsync_duration_seconds_count{stream="s"}`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// nodeHTTP serves n's /status and /metrics, as the fastmq agent does.
func nodeHTTP(n *fastmq.Node) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/status", n.StatusHandler())
	mux.Handle("/metrics", metrics.NodeHandler(n))
	return mux
}
