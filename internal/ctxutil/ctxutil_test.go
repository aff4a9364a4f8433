package ctxutil

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !Sleep(context.Background(), time.Second) {
			t.Fatal("Sleep with a live context returned false")
		}
		if got := time.Since(start); got != time.Second {
			t.Fatalf("slept %v, want 1s", got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start = time.Now()
		if Sleep(ctx, time.Hour) {
			t.Fatal("Sleep outlived its context")
		}
		if got := time.Since(start); got != 100*time.Millisecond {
			t.Fatalf("returned after %v, want 100ms", got)
		}
		if Sleep(ctx, 0) {
			t.Fatal("zero sleep on an ended context reported success")
		}
	})
}
