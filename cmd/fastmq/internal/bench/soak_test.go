package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestSoakShort runs the soak for a few seconds and checks that it
// samples, prints the slopes and delivers records to every consumer.
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nine nodes for seconds")
	}
	var out strings.Builder
	err := Soak(context.Background(), &out, SoakOptions{Duration: 3 * time.Second, Interval: time.Second, Consumers: 2, Rate: 500, Churn: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	t.Log("\n" + s)
	for _, want := range []string{"rss", "goroutines", "open files", "slope per minute", "after every node closed"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(s, "delivered 0 records") {
		t.Error("nothing delivered")
	}
	if err := Soak(context.Background(), &out, SoakOptions{}); err == nil {
		t.Error("a soak without duration ran")
	}
}
