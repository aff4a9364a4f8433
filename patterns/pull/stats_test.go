package pull_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// TestDeliveredCountsNext: Delivered counts the records Next returned,
// Fetched those waiting for it as well.
func TestDeliveredCountsNext(t *testing.T) {
	l := openSpool(t, spool.Config{})
	appendN(t, l, "r", 0, 100)
	srv := startServer(t, map[string]*spool.Log{"s": l})
	c := startConsumer(t, pull.ConsumerConfig{Stream: "s", Publishers: map[string]string{"p": srv.Endpoints()[0]}})
	testutil.WaitFor(t, "100 records fetched", 0, func() bool {
		st, _ := publisherStats(c, "p")
		return st.Fetched == 100
	})
	if st, _ := publisherStats(c, "p"); st.Delivered != 0 {
		t.Fatalf("delivered %d before any Next", st.Delivered)
	}
	for i := 0; i < 3; i++ {
		next(t, c)
	}
	if st, _ := publisherStats(c, "p"); st.Delivered != 3 || st.Fetched != 100 {
		t.Fatalf("delivered %d, fetched %d; want 3 and 100", st.Delivered, st.Fetched)
	}
}

// TestPublisherStatsJSON: the JSON of PublisherStats is snake_case.
func TestPublisherStatsJSON(t *testing.T) {
	b, err := json.Marshal(pull.PublisherStats{Publisher: "p"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k := range m {
		if strings.ToLower(k) != k {
			t.Errorf("key %q is not snake_case", k)
		}
	}
	for _, k := range []string{"publisher", "delivered", "fetched", "lag_time_ns", "oldest_unacked_ns", "gaps_skipped", "records_skipped", "other_logs", "diverged", "records_replaced"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no key %q in %s", k, b)
		}
	}
}
