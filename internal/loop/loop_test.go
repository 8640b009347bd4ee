package loop_test

import (
	"context"
	"testing"
	"time"

	"github.com/shop/shop/internal/loop"
)

// Every works each interval, and returns once its context ends.
func TestEveryWorksUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop.Every(ctx, time.Millisecond, func(context.Context) {
			if calls++; calls == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return once its context ended")
	}
	if calls != 3 {
		t.Fatalf("work ran %d times, want 3: none after the context ended", calls)
	}
}
