package pull_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// TestUnackedRecordReported: a record delivered and never acknowledged
// holds the committed position back; its age is in PublisherStats and a
// warning names it once, when it passes UnackedWarn.
func TestUnackedRecordReported(t *testing.T) {
	const warnAfter = 100 * time.Millisecond
	l := openSpool(t, spool.Config{})
	appendN(t, l, "r", 0, 10)
	srv := startServer(t, map[string]*spool.Log{"s": l})
	store, err := spool.OpenOffsets(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	logs := newWarnings()
	c := startConsumer(t, pull.ConsumerConfig{
		Stream: "s", Publishers: map[string]string{"p": srv.Endpoints()[0]},
		Offsets: store, UnackedWarn: warnAfter, Logger: slog.New(logs),
	})
	var held []pull.Message // offsets 3 and 7
	for i := 0; i < 10; i++ {
		m := next(t, c)
		if m.Offset == 3 || m.Offset == 7 {
			held = append(held, m)
			continue
		}
		c.Ack(m)
	}
	warned := func(offset string) int {
		n := 0
		logs.mu.Lock()
		defer logs.mu.Unlock()
		for _, l := range *logs.lines {
			if strings.Contains(l, "not acknowledged") && strings.Contains(l, "peer=p") && strings.Contains(l, "offset="+offset+" ") {
				n++
			}
		}
		return n
	}
	testutil.WaitFor(t, "a warning about offset 3", 0, func() bool { return warned("3") > 0 })
	// Many checks later, still one warning for it.
	testutil.WaitFor(t, "offset 3 out for 5 thresholds", 0, func() bool {
		st, _ := publisherStats(c, "p")
		return st.OldestUnacked >= 5*warnAfter
	})
	st, _ := publisherStats(c, "p")
	if st.Acked != 3 || st.StuckRecords != 1 || warned("3") != 1 {
		t.Fatalf("stats %+v, %d warnings for offset 3: want acked 3, one stuck record, one warning", st, warned("3"))
	}

	// Acknowledged, the next one held (7, out as long) is reported.
	c.Ack(held[0])
	testutil.WaitFor(t, "a warning about offset 7", 0, func() bool { return warned("7") > 0 })
	c.Ack(held[1])
	testutil.WaitFor(t, "everything acknowledged", 0, func() bool {
		st, _ := publisherStats(c, "p")
		return st.Acked == 10 && st.OldestUnacked == 0
	})
	if st, _ := publisherStats(c, "p"); st.StuckRecords != 2 || warned("3") != 1 || warned("7") != 1 {
		t.Fatalf("stats %+v, warnings %q: want two stuck records, one warning each", st, *logs.lines)
	}
}
