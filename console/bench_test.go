package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/fastmq/fastmq/console"
)

// BenchmarkGatherMesh20x60 gathers the mesh as the console's page does
// every time it refreshes (the cache aside): 20 members, each asked for
// its status over HTTP concurrently, 60 streams in all (3 per member), and
// the view encoded as the page gets it. It reports the JSON's size.
func BenchmarkGatherMesh20x60(b *testing.B) {
	names := make([]string, 20)
	for i := range names {
		names[i] = fmt.Sprintf("m%02d", i)
	}
	as := startMesh(b, names...)
	ctx := context.Background()
	for i, a := range as {
		for k := range 3 {
			if _, err := a.node.Publish(ctx, fmt.Sprintf("s%02d-%d", i, k), []byte("record")); err != nil {
				b.Fatal(err)
			}
		}
	}
	client := &http.Client{Timeout: 2 * time.Second}
	b.ReportAllocs()
	b.ResetTimer()
	var size int
	for range b.N {
		ms := console.GatherMesh(ctx, as[0].node, client)
		if len(ms.Members) != len(names) {
			b.Fatalf("%d members gathered, want %d", len(ms.Members), len(names))
		}
		streams := 0
		for _, m := range ms.Members {
			if m.Down {
				b.Fatalf("member %s down: %s", m.Name, m.Error)
			}
			if m.State != nil {
				streams += len(m.State.Streams)
			}
		}
		if streams != 3*len(names) {
			b.Fatalf("%d streams gathered, want %d", streams, 3*len(names))
		}
		j, err := json.Marshal(ms)
		if err != nil {
			b.Fatal(err)
		}
		size = len(j)
	}
	b.ReportMetric(float64(size), "json-bytes")
}
