package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/metrics"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/patterns/rpc"
	"github.com/fastmq/fastmq/spool"
)

// TestHandler checks that each part of a snapshot is exported under its
// name and labels, read at scrape time.
func TestHandler(t *testing.T) {
	scrapes := 0
	h := metrics.Handler(func() metrics.Snapshot {
		scrapes++
		return metrics.Snapshot{
			Streams: []metrics.Stream{{Name: "s", Oldest: 2, Next: 7, Bytes: 4096,
				Fsyncs: spool.FsyncStats{Counts: [len(spool.FsyncBuckets) + 1]uint64{2, 1}, Count: 3, Sum: 2 * time.Millisecond}}},
			Server: pull.ServerStats{RecordsServed: 5, Parked: 1, Forbidden: 3},
			Consumers: []metrics.Consumer{{Name: "c", Stream: "s", Publishers: []pull.PublisherStats{
				{Publisher: "p", Delivered: 4, LagRecords: 3, LagTime: 1500 * time.Millisecond, Committed: ^uint64(0),
					OldestUnacked: 90 * time.Second, StuckRecords: 1, Fetched: 9, GapsSkipped: 1, RecordsSkipped: 5,
					OtherLogs: 1, Diverged: 2, RecordsReplaced: 10, StoppedReason: "damaged"},
			}}},
			Members: map[string]int{"alive": 2, "failed": 1},
			RPCClients: map[string]rpc.ClientStats{"upper": {Calls: 6, Retries: 1, Latency: rpc.Histogram{Counts: [len(rpc.LatencyBuckets) + 1]uint64{6}},
				Instances: []rpc.InstanceStats{{Node: "s1", Calls: 7, Failures: 1, Timeouts: 1, Outstanding: 2,
					Latency: rpc.Histogram{Counts: [len(rpc.LatencyBuckets) + 1]uint64{5, 1}}}}}},
			RPCServers: map[string]rpc.ServerStats{"upper": {Requests: 7, Handled: 6, Overloaded: 1}},
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
		`fastmq_server_forbidden_total 3`,
		`fastmq_consumer_delivered_total{consumer="c",publisher="p",stream="s"} 4`,
		`fastmq_consumer_lag_records{consumer="c",publisher="p",stream="s"} 3`,
		`fastmq_consumer_lag_seconds{consumer="c",publisher="p",stream="s"} 1.5`,
		`fastmq_consumer_oldest_unacked_seconds{consumer="c",publisher="p",stream="s"} 90`,
		`fastmq_consumer_stuck_records_total{consumer="c",publisher="p",stream="s"} 1`,
		`fastmq_consumer_fetched_total{consumer="c",publisher="p",stream="s"} 9`,
		`fastmq_consumer_gaps_skipped_total{consumer="c",publisher="p",stream="s"} 1`,
		`fastmq_consumer_records_skipped_total{consumer="c",publisher="p",stream="s"} 5`,
		`fastmq_consumer_other_logs_total{consumer="c",publisher="p",stream="s"} 1`,
		`fastmq_consumer_diverged_total{consumer="c",publisher="p",stream="s"} 2`,
		`fastmq_consumer_records_replaced_total{consumer="c",publisher="p",stream="s"} 10`,
		`fastmq_consumer_publisher_stopped{consumer="c",publisher="p",stream="s"} 1`,
		`fastmq_stream_bytes{stream="s"} 4096`,
		`fastmq_spool_fsync_duration_seconds_bucket{stream="s",le="0.0005"} 2`,
		`fastmq_spool_fsync_duration_seconds_bucket{stream="s",le="0.001"} 3`,
		`fastmq_spool_fsync_duration_seconds_count{stream="s"} 3`,
		`fastmq_rpc_client_calls_total{service="upper"} 6`,
		`fastmq_rpc_client_retries_total{service="upper"} 1`,
		`fastmq_rpc_client_latency_seconds_count{service="upper"} 6`,
		`fastmq_rpc_client_instance_attempts_total{instance="s1",service="upper"} 7`,
		`fastmq_rpc_client_instance_failures_total{instance="s1",service="upper"} 1`,
		`fastmq_rpc_client_instance_timeouts_total{instance="s1",service="upper"} 1`,
		`fastmq_rpc_client_instance_outstanding{instance="s1",service="upper"} 2`,
		`fastmq_rpc_client_instance_latency_seconds_bucket{instance="s1",service="upper",le="0.00025"} 6`,
		`fastmq_rpc_server_handled_total{service="upper"} 6`,
		`fastmq_rpc_server_refused_total{reason="overloaded",service="upper"} 1`,
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
