package accounts

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/shop/shop/config"
	"github.com/shop/shop/database"
)

// A page view reads its session; it writes last_seen_at only when that is
// over touchEvery old, so a busy browser costs a write a minute, not one a
// page.
func TestLookupTouchesASessionOnlyOnceAMinute(t *testing.T) {
	db, err := database.Open(filepath.Join(t.TempDir(), "shop.db"), database.Options{GroupCommit: config.Default().GroupCommit})
	if err != nil {
		t.Fatal(err)
	}
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := NewAccounts(db, 4)
	if err != nil {
		t.Fatal(err)
	}
	user, err := a.SignUp(ctx, "ann@example.com", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	sessions := Sessions{DB: db, Idle: time.Hour, MaxAge: 24 * time.Hour}
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	token, session, err := sessions.Start(ctx, user.ID, start)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		at, stored time.Duration
	}{
		{30 * time.Second, 0},
		{touchEvery - time.Nanosecond, 0},
		{touchEvery, touchEvery},
		{touchEvery + 30*time.Second, touchEvery},
	} {
		if _, err := sessions.Lookup(ctx, token, start.Add(step.at)); err != nil {
			t.Fatalf("lookup at +%s: %v", step.at, err)
		}
		var stored Session
		if err := db.Take(&stored, session.ID).Error; err != nil {
			t.Fatal(err)
		}
		if want := start.Add(step.stored); !stored.LastSeenAt.Equal(want) {
			t.Fatalf("after a lookup at +%s, last_seen_at is %s, want %s", step.at, stored.LastSeenAt, want)
		}
	}
}
