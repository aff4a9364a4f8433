package fastmq_test

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"

	"github.com/fastmq/fastmq"
)

func gogcNow() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

func TestKeepHeapRoom(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	// 1 GiB of room: far more than this test binary keeps live, so
	// GOGC goes above its 100 whatever ran before.
	runtime.GC() // the live heap it starts from: the other tests' garbage collected
	stop := fastmq.KeepHeapRoom(1 << 30)
	if got := gogcNow(); got <= 100 {
		stop()
		t.Fatalf("GOGC %d with the room kept, want above 100", got)
	}
	stop()
	if got := gogcNow(); got != 100 {
		t.Fatalf("GOGC %d after stop, want 100 back", got)
	}
	if stop := fastmq.KeepHeapRoom(0); gogcNow() != 100 {
		stop()
		t.Fatal("a room of 0 changed GOGC")
	}
}
