package accounts

import (
	"context"
	"crypto/sha256"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/shop/shop/config"
	"github.com/shop/shop/database"
	"github.com/shop/shop/models"
	"golang.org/x/crypto/bcrypt"
)

// A lookup that read the token before this instance revoked it, and ends
// after, does not bring the token back: the next use is refused at once.
func TestALookupEndingAfterARevocationDoesNotBringTheTokenBack(t *testing.T) {
	db, err := database.Open(filepath.Join(t.TempDir(), "shop.db"), database.Options{GroupCommit: config.Default().GroupCommit})
	if err != nil {
		t.Fatal(err)
	}
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	a, err := NewAccounts(db, bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	a.Tokens = NewTokenCache(time.Hour)
	ctx, now := context.Background(), time.Now()
	user, err := a.SignUp(ctx, "ann@example.com", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	token, err := a.IssueToken(ctx, user, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}

	// TokenUser's steps, with the revocation between its read and its keep.
	sum := sha256.Sum256([]byte(token))
	read, readUser, err := a.readToken(ctx, hashToken(token), now)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.RevokeToken(ctx, read, now); err != nil {
		t.Fatal(err)
	}
	a.Tokens.keep(sum, tokenLookup{token: read, user: readUser, read: now})

	if _, _, err := a.TokenUser(ctx, token, now); !errors.Is(err, models.ErrTokenRevoked) {
		t.Fatalf("after the revocation: %v, want ErrTokenRevoked", err)
	}
	var revoked int64
	if err := db.Model(&models.APIToken{}).Where("revoked_at IS NOT NULL").Count(&revoked).Error; err != nil || revoked != 1 {
		t.Fatalf("%d revoked rows, %v; want 1", revoked, err)
	}
}
