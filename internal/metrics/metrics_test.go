package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/metrics"
	"github.com/fastmq/fastmq/patterns/pull"
)

// TestHandler checks that each part of a snapshot is exported under its
// name and labels, read at scrape time.
func TestHandler(t *testing.T) {
	scrapes := 0
	h := metrics.Handler(func() metrics.Snapshot {
		scrapes++
		return metrics.Snapshot{
			Streams: []metrics.Stream{{Name: "s", Oldest: 2, Next: 7}},
			Server:  pull.ServerStats{RecordsServed: 5, Parked: 1},
			Consumers: []metrics.Consumer{{Name: "c", Stream: "s", Publishers: []pull.PublisherStats{
				{Publisher: "p", Delivered: 4, LagRecords: 3, LagTime: 1500 * time.Millisecond, Committed: ^uint64(0),
					OldestUnacked: 90 * time.Second, StuckRecords: 1},
			}}},
			Members: map[string]int{"alive": 2, "failed": 1},
		}
	})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`fastmq_stream_next_offset{stream="s"} 7`,
		`fastmq_stream_oldest_offset{stream="s"} 2`,
		`fastmq_server_records_served_total 5`,
		`fastmq_server_parked_fetches 1`,
		`fastmq_consumer_delivered_total{consumer="c",publisher="p",stream="s"} 4`,
		`fastmq_consumer_lag_records{consumer="c",publisher="p",stream="s"} 3`,
		`fastmq_consumer_lag_seconds{consumer="c",publisher="p",stream="s"} 1.5`,
		`fastmq_consumer_oldest_unacked_seconds{consumer="c",publisher="p",stream="s"} 90`,
		`fastmq_consumer_stuck_records_total{consumer="c",publisher="p",stream="s"} 1`,
		`fastmq_members{status="alive"} 2`,
		`fastmq_members{status="failed"} 1`,
		`go_goroutines`,
		`process_open_fds`,
		`go_build_info`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "fastmq_consumer_committed_offset") {
		t.Errorf("a committed offset is exported before anything was committed:\n%s", b)
	}
	if scrapes != 1 {
		t.Errorf("one scrape took %d snapshots, want 1", scrapes)
	}
}
