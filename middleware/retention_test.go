package middleware

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"
)

// The sweeper deletes expired keys one short statement per batch, so claims
// go on between batches: a new key, and an expired key claimed again as a
// new operation, both made in the middle of a sweep, run at once and are
// not deleted by the batches after them.
func TestSweepInBatchesDoesNotBlockClaims(t *testing.T) {
	h := newHarness(t)
	now := h.clock.Now()
	const expired, batch = 120, 50
	keys := make([]IdempotencyKey, expired)
	for i := range keys {
		keys[i] = IdempotencyKey{
			Scope: "alice", Key: fmt.Sprintf("old-%d", i), OperationID: fmt.Sprintf("op-%d", i), Method: "POST", Route: "/widgets/:id",
			Fingerprint: "f", State: KeyCompleted, OwnerToken: "o", LockedUntil: now.Add(-2 * time.Hour),
			Status: http.StatusCreated, Headers: "{}", CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(-time.Hour),
		}
	}
	if err := h.db.CreateInBatches(keys, 100).Error; err != nil {
		t.Fatal(err)
	}
	h.do(call{key: "fresh", body: `{}`})

	var deletes int
	var during []answer
	err := h.db.Callback().Row().Before("gorm:row").Register("test:claim-between-batches", func(tx *gorm.DB) {
		if !strings.HasPrefix(tx.Statement.SQL.String(), "DELETE FROM idempotency_keys") {
			return
		}
		deletes++
		if deletes == 2 {
			// Claims made after the first batch, before the next one runs:
			// had the sweep held a lock across batches, these would wait for
			// it, here forever, on the goroutine that holds it.
			during = append(during, h.do(call{key: "during-sweep", body: `{}`}), h.do(call{key: fmt.Sprintf("old-%d", expired-1), body: `{"new":true}`}))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := h.mw.Sweep(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range during {
		wantAnswer(t, a, http.StatusCreated, false)
	}
	if deletes < expired/batch+1 {
		t.Fatalf("%d DELETE statements for %d expired keys in batches of %d", deletes, expired, batch)
	}
	// The expired key claimed again during the sweep is a new operation:
	// deleted before it was claimed, or taken over by the claim, it is not
	// deleted after.
	if n != expired && n != expired-1 {
		t.Fatalf("swept %d keys, want the %d expired ones (but the reclaimed one, if it was reached after)", n, expired)
	}
	h.wantKeys("alice/during-sweep=completed", "alice/fresh=completed", fmt.Sprintf("alice/old-%d=completed", expired-1))
	h.wantRuns("/widgets/1", 3)
}

func TestSweep(t *testing.T) {
	h := newHarness(t)
	now := h.clock.Now()
	rows := []struct {
		scope, key, state, owner string
		expires, lockedUntil     time.Duration // from now
		deleted                  bool
	}{
		{"alice", "done-expired", KeyCompleted, "o", -time.Second, time.Hour, true},
		{"alice", "done-at-expiry", KeyCompleted, "o", 0, -time.Hour, true},
		{"bob", "done-expired", KeyCompleted, "o", -time.Hour, -2 * time.Hour, true},
		{"alice", "done-fresh", KeyCompleted, "o", time.Second, -time.Hour, false},
		{"alice", "stalled-expired", KeyInProgress, "o", -time.Minute, -time.Second, true},
		{"alice", "lease-ends-now-expired", KeyInProgress, "o", -time.Minute, 0, true},
		{"alice", "released-expired", KeyInProgress, "", -time.Second, -2 * time.Hour, true},
		{"alice", "running-expired", KeyInProgress, "o", -time.Minute, time.Minute, false},
		{"alice", "stalled-fresh", KeyInProgress, "o", time.Hour, -time.Minute, false},
		{"alice", "released-fresh", KeyInProgress, "", time.Hour, -time.Minute, false},
	}
	var want []string
	for _, r := range rows {
		k := IdempotencyKey{
			Scope: r.scope, Key: r.key, OperationID: "op-" + r.key, Method: "POST", Route: "/widgets/:id",
			Fingerprint: "f", State: r.state, OwnerToken: r.owner, LockedUntil: now.Add(r.lockedUntil),
			CreatedAt: now.Add(r.expires - time.Hour), ExpiresAt: now.Add(r.expires),
		}
		if err := h.db.Create(&k).Error; err != nil {
			t.Fatal(err)
		}
		if !r.deleted {
			state := r.state
			if k.Released() {
				state = "released"
			}
			want = append(want, r.scope+"/"+r.key+"="+state)
		}
	}
	slices.Sort(want)

	n, err := h.mw.Sweep(context.Background(), 2)
	if err != nil || n != 6 {
		t.Fatalf("Sweep = %d, %v; want 6 deleted", n, err)
	}
	h.wantKeys(want...)
	if n, err := h.mw.Sweep(context.Background(), 2); err != nil || n != 0 {
		t.Fatalf("second Sweep = %d, %v; want nothing left to delete", n, err)
	}
}
