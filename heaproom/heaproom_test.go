package heaproom_test

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"

	"github.com/fastmq/fastmq/heaproom"
)

func gogcNow() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

func TestKeep(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	// 1 GiB of room: far more than this test binary keeps live, so
	// GOGC goes above its 100 whatever ran before.
	runtime.GC() // the live heap it starts from: the other tests' garbage collected
	stop := heaproom.Keep(1 << 30)
	if got := gogcNow(); got <= 100 {
		stop()
		t.Fatalf("GOGC %d with the room kept, want above 100", got)
	}
	stop()
	if got := gogcNow(); got != 100 {
		t.Fatalf("GOGC %d after stop, want 100 back", got)
	}
	if stop := heaproom.Keep(0); gogcNow() != 100 {
		stop()
		t.Fatal("a room of 0 changed GOGC")
	}
}

// A program moving records at full speed keeps some heap room between
// garbage collections, once, in main (the fastmq command keeps Default
// unless GOGC is set).
func ExampleKeep() {
	if _, set := os.LookupEnv("GOGC"); !set {
		defer heaproom.Keep(heaproom.Default)()
	}
	// ... start the node, publish, consume ...
}
