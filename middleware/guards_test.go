package middleware

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/internal/testkit"
)

// Each test here protects one guard that another layer would hide from the
// rest of the suite: without the guard, the test fails.

// release is fenced by the owner token: attempt A, taken over by retry B,
// fails while B still runs; A's release must not free B's key, and A
// answers 409 lease lost.
func TestReleaseIsFencedWhileTheNewOwnerRuns(t *testing.T) {
	var g *gate
	h := newHarness(t, withWait(0), withHooks(hooks{
		before: func(c *gin.Context, run int) { g.block(c, run) },
		after: func(c *gin.Context, run int) {
			if run == 1 {
				c.Set(statusKey, http.StatusBadGateway)
			}
		},
	}))
	g = newGate(t, 1, 2)
	c := call{key: "k", body: `{}`}
	aDone := h.async(c)
	testkit.Recv(t, g.entered, "attempt A in the handler")
	h.clock.Advance(2 * time.Minute) // past A's one-minute lease
	bDone := h.async(c)
	testkit.Recv(t, g.entered, "retry B in the handler, having taken the key over")
	b, _ := h.key("alice", "k")

	g.release(1)
	wantProblem(t, testkit.Recv(t, aDone, "attempt A's answer"), refuseLeaseLost)
	if k, _ := h.key("alice", "k"); k.OwnerToken != b.OwnerToken || k.Released() {
		t.Fatalf("after A's failure the key is %+v, want B's still", k)
	}
	wantProblem(t, h.do(c), refuseInProgress)

	g.release(2)
	wantAnswer(t, testkit.Recv(t, bDone, "retry B's answer"), http.StatusCreated, false)
	h.wantKeys("alice/k=completed")
	h.wantRuns("/widgets/1", 2)
}

// takeover is fenced by the previous owner: a takeover based on a stale
// read of the owner fails, even once the new owner's lease has passed too;
// and by the operation read: one of another operation of the key fails.
func TestTakeoverIsFencedByThePreviousOwner(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	now := h.now().UTC().Truncate(time.Microsecond)
	k := IdempotencyKey{
		Scope: "alice", Key: "k", OperationID: "op", Method: "POST", Route: "/widgets/:id", Fingerprint: "f",
		State: KeyInProgress, OwnerToken: "first", LockedUntil: now.Add(-time.Minute),
		CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour),
	}
	if err := h.db.Create(&k).Error; err != nil {
		t.Fatal(err)
	}
	want := k
	want.OwnerToken, want.LockedUntil = "second", now.Add(time.Second)
	if took, err := h.mw.store.takeover(ctx, want, "first", now); err != nil || !took {
		t.Fatalf("takeover from the current owner = %v, %v; want it taken", took, err)
	}
	later := now.Add(time.Minute) // the second owner's lease has passed as well
	stale := k
	stale.OwnerToken, stale.LockedUntil = "third", later.Add(time.Minute)
	if took, err := h.mw.store.takeover(ctx, stale, "first", later); err != nil || took {
		t.Fatalf("takeover read before the second owner's = %v, %v; want refused", took, err)
	}
	if got, _ := h.key("alice", "k"); got.OwnerToken != "second" {
		t.Fatalf("owner %q, want second", got.OwnerToken)
	}
	if took, err := h.mw.store.takeover(ctx, stale, "second", later); err != nil || !took {
		t.Fatalf("takeover from the second owner = %v, %v; want it taken", took, err)
	}
	other := stale // read of another operation of the key (swept and claimed anew meanwhile)
	other.OwnerToken, other.OperationID = "fourth", "another"
	if took, err := h.mw.store.takeover(ctx, other, "third", later.Add(2*time.Minute)); err != nil || took {
		t.Fatalf("takeover read of another operation = %v, %v; want refused", took, err)
	}
}

// A key past its TTL whose attempt still holds its lease is not a new
// operation: neither the claim statement nor claimable may take it.
func TestExpiredKeyHeldUnderALeaseIsNotClaimed(t *testing.T) {
	h := newHarness(t)
	now := h.now().UTC().Truncate(time.Microsecond)
	held := IdempotencyKey{
		Scope: "alice", Key: "k", OperationID: "op", Method: "POST", Route: "/widgets/:id", Fingerprint: "f",
		State: KeyInProgress, OwnerToken: "owner", LockedUntil: now.Add(time.Minute),
		CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(-time.Hour),
	}
	if claimable(held, now) {
		t.Fatal("claimable: an expired key under a live lease counts as free")
	}
	for _, free := range []func(k *IdempotencyKey){
		func(k *IdempotencyKey) { k.LockedUntil = now },
		func(k *IdempotencyKey) { k.State = KeyCompleted },
	} {
		k := held
		free(&k)
		if !claimable(k, now) {
			t.Fatalf("claimable(%+v) = false, want an expired key nobody holds to be free", k)
		}
	}
	if err := h.db.Create(&held).Error; err != nil {
		t.Fatal(err)
	}
	claim := IdempotencyKey{
		Scope: "alice", Key: "k", OperationID: "op-2", Method: "POST", Route: "/widgets/:id", Fingerprint: "g",
		State: KeyInProgress, OwnerToken: "claimer", LockedUntil: now.Add(time.Minute), CreatedAt: now, ExpiresAt: now.Add(time.Hour),
	}
	if claimed, err := h.mw.store.claim(context.Background(), claim); err != nil || claimed != 0 {
		t.Fatalf("claim = %v, %v; want refused while the lease is held", claimed, err)
	}
	if got, _ := h.key("alice", "k"); got.OwnerToken != "owner" || got.OperationID != "op" {
		t.Fatalf("the key became %+v", got)
	}
}

// End to end: A hangs; near the TTL a retry B takes it over; the TTL
// passes while B holds its lease; a duplicate gets 409 in progress instead
// of starting a new operation. The handler ran twice, not three times.
func TestKeyExpiringUnderALiveTakeoverIsNotANewOperation(t *testing.T) {
	var g *gate
	h := newHarness(t, withWait(0), withHooks(hooks{before: func(c *gin.Context, run int) { g.block(c, run) }}))
	g = newGate(t, 1, 2)
	c := call{key: "k", body: `{}`}
	aDone := h.async(c)
	testkit.Recv(t, g.entered, "attempt A in the handler")
	h.clock.Advance(time.Hour - 30*time.Second) // A's lease passed; the TTL is near
	bDone := h.async(c)
	testkit.Recv(t, g.entered, "retry B in the handler, having taken the key over")
	h.clock.Advance(40 * time.Second) // past the TTL, within B's lease
	wantProblem(t, h.do(c), refuseInProgress)
	h.wantRuns("/widgets/1", 2)
	g.release(2)
	wantAnswer(t, testkit.Recv(t, bDone, "retry B's answer"), http.StatusCreated, false)
	g.release(1)
	wantProblem(t, testkit.Recv(t, aDone, "attempt A's answer"), refuseLeaseLost)
	h.wantRuns("/widgets/1", 2)
}

// claimable and claimableSQL are the one rule, "expired and nobody holds
// it", in Go and in SQL: over every state, and an expiry and a lease each
// before, at and after the moment, the sweep deletes exactly the keys
// claimable calls free, and the claim statement takes exactly those.
func TestClaimableAgreesWithTheSQL(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	now := h.now().UTC().Truncate(time.Microsecond)
	moments := []time.Time{now.Add(-time.Minute), now, now.Add(time.Minute)}
	var keys []IdempotencyKey
	for _, state := range []struct{ state, owner string }{{KeyInProgress, "owner"}, {KeyInProgress, ""}, {KeyCompleted, "owner"}} {
		for _, expires := range moments {
			for _, locked := range moments {
				keys = append(keys, IdempotencyKey{
					Scope: "alice", Key: fmt.Sprintf("k%d", len(keys)), OperationID: "op", Method: "POST", Route: "/widgets/:id",
					Fingerprint: "f", State: state.state, OwnerToken: state.owner, LockedUntil: locked,
					CreatedAt: now.Add(-time.Hour), ExpiresAt: expires,
				})
			}
		}
	}
	if err := h.db.Create(&keys).Error; err != nil {
		t.Fatal(err)
	}
	var claimed []string
	for _, k := range keys {
		want := k
		want.OperationID, want.OwnerToken, want.State = "op-new", "claimer", KeyInProgress
		want.CreatedAt, want.LockedUntil, want.ExpiresAt = now, now.Add(time.Minute), now.Add(time.Hour)
		id, err := h.mw.store.claim(ctx, want)
		if err != nil {
			t.Fatal(err)
		}
		took := id != 0
		if took != claimable(k, now) {
			t.Errorf("claim of %+v = %v, claimable = %v", k, took, claimable(k, now))
		}
		if row, _ := h.key(k.Scope, k.Key); took && id != row.ID {
			t.Errorf("claim of %+v returned row %d; the key's row is %d", k, id, row.ID)
		}
		if took {
			claimed = append(claimed, k.Key)
		}
	}
	if len(claimed) == 0 || len(claimed) == len(keys) {
		t.Fatalf("the grid claimed %d of %d keys; want some of each", len(claimed), len(keys))
	}
	if err := h.db.Where("1 = 1").Delete(&IdempotencyKey{}).Error; err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		keys[i].ID = 0
	}
	if err := h.db.Create(&keys).Error; err != nil { // as they were before the claims
		t.Fatal(err)
	}
	swept, err := h.mw.store.sweep(ctx, now, len(keys)+1)
	if err != nil {
		t.Fatal(err)
	}
	if len(swept) != len(claimed) {
		t.Fatalf("the sweep deleted %d keys, claimable frees %d", len(swept), len(claimed))
	}
	for _, k := range keys {
		if _, found := h.key(k.Scope, k.Key); found == claimable(k, now) {
			t.Errorf("after the sweep %+v is there = %v; claimable = %v", k, found, claimable(k, now))
		}
	}
}
