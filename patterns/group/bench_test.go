package group_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/spool"
)

// BenchmarkGroupAcked measures records acknowledged per second end to
// end: one publisher, three members in this process, 100 B records, each
// leased, handled (nothing) and acknowledged explicitly.
func BenchmarkGroupAcked(b *testing.B) {
	p := newPublisher(b, b.TempDir())
	l, err := p.open("s")
	if err != nil {
		b.Fatal(err)
	}
	val := make([]byte, 100)
	for i := 0; i < b.N; i += 1000 {
		recs := make([]spool.Record, min(1000, b.N-i))
		for j := range recs {
			recs[j].Value = val
		}
		if _, err := l.Append(context.Background(), recs...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.SetBytes(100)
	b.ResetTimer()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		m := member(b, group.MemberConfig{Name: fmt.Sprintf("m%d", i), Buffer: 1024, MaxAckPending: 16384}, p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Run(ctx, 64, func(context.Context, *group.Message) error { return nil })
		}()
	}
	testutil.WaitFor(b, "every record acknowledged", 5*time.Minute, func() bool {
		c, _ := p.groups.Counters("s", "g")
		return c.Acked == uint64(b.N)
	})
	b.StopTimer()
	cancel()
	wg.Wait()
}
