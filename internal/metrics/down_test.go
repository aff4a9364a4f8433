package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/metrics"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/pull"
)

// TestDownPublishersAndObservers: a down publisher's last known stream
// and group are exported with since when it is down; members tagged as
// observers (commands' short-lived nodes) are not counted; named readers
// of the spool server are exported with their lag.
func TestDownPublishersAndObservers(t *testing.T) {
	last := fastmq.Status{Name: "p1", Streams: []fastmq.StreamStatus{{Name: "crm", Oldest: 0, Next: 2683}},
		Groups: []group.GroupStats{{Stream: "crm", Group: "billing", Lag: 2683}}}
	st := fastmq.Status{Members: []fastmq.MemberStatus{{Name: "a", Status: "alive"},
		{Name: "group-ls-h-1", Status: "left", Tags: map[string]string{fastmq.ObserverTag: "1"}}},
		Readers: []pull.ClientStats{{Stream: "crm", Consumer: "billing", Node: "w1", Position: 7, High: 10},
			{Stream: "crm", Peer: "127.0.0.1:5", Position: 1, High: 10}}}
	since := time.Unix(1700000000, 0)
	h := metrics.Handler(func() metrics.Snapshot {
		s := metrics.FromStatus(st)
		s.Down = []metrics.DownPublisher{metrics.DownFrom(last, since)}
		return s
	})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	out := string(b)
	for _, want := range []string{
		`fastmq_publisher_down_since_seconds{publisher="p1"} 1.7e+09`,
		`fastmq_down_publisher_stream_records{publisher="p1",stream="crm"} 2683`,
		`fastmq_down_publisher_group_lag_records{group="billing",publisher="p1",stream="crm"} 2683`,
		`fastmq_members{status="alive"} 1`,
		`fastmq_reader_lag_records{consumer="billing",node="w1",stream="crm"} 3`,
		`fastmq_reader_position{consumer="billing",node="w1",stream="crm"} 7`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Count(out, "fastmq_reader_position{") != 1 {
		t.Error("a reader without names exported")
	}
	if strings.Contains(out, `fastmq_members{status="left"}`) {
		t.Error("an observer counted as a left member")
	}
}
