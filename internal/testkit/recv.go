package testkit

import (
	"testing"
	"time"
)

// Recv takes the next value of ch. The timeout only turns a hang into a
// failure; no test waits on it to let something happen.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}
