package handlers

import (
	"fmt"
	"testing"
	"time"
)

// An address gets perMinute requests at once, then waits for a token; a
// full map forgets the addresses idle for a minute (their buckets are full
// again) and keeps the others.
func TestAddressLimits(t *testing.T) {
	l := newAddressLimits(2)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 2 {
		if ok, _ := l.take("a", now); !ok {
			t.Fatalf("request %d refused", i+1)
		}
	}
	if ok, wait := l.take("a", now); ok || wait <= 0 || wait > 30*time.Second {
		t.Fatalf("third request: %v, wait %s; want refused, a token in 30s", ok, wait)
	}
	if ok, _ := l.take("b", now); !ok {
		t.Fatal("another address shares the first one's bucket")
	}
	for i := range maxTrackedAddresses {
		l.take(fmt.Sprintf("old-%d", i), now.Add(-time.Minute))
	}
	l.take("c", now)
	if _, kept := l.buckets["a"]; !kept || len(l.buckets) != 3 {
		t.Fatalf("%d addresses tracked, want a, b and c only", len(l.buckets))
	}
	if ok, _ := l.take("a", now); ok {
		t.Fatal("forgetting idle addresses refilled a busy one")
	}
}
