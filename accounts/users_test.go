package accounts

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shop/shop/config"
	"github.com/shop/shop/database"
	"github.com/shop/shop/models"
	"golang.org/x/crypto/bcrypt"
)

// A log-in with an unknown email costs one bcrypt comparison at the
// accounts' cost against the one dummy hash made at start-up, whatever the
// password's length: hashing the password instead answers at once for one
// over 72 bytes, which tells that the email has no account.
func TestLogInWithAnUnknownEmailComparesWithTheDummyHash(t *testing.T) {
	db, err := database.Open(filepath.Join(t.TempDir(), "shop.db"), database.Options{GroupCommit: config.Default().GroupCommit})
	if err != nil {
		t.Fatal(err)
	}
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	const cost = bcrypt.MinCost + 1
	a, err := NewAccounts(db, cost)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.SignUp(context.Background(), "ann@example.com", "correct horse"); err != nil {
		t.Fatal(err)
	}
	var compared [][]byte
	t.Cleanup(func() { compareHash = bcrypt.CompareHashAndPassword })
	compareHash = func(hash, password []byte) error {
		compared = append(compared, hash)
		return bcrypt.CompareHashAndPassword(hash, password)
	}
	for _, password := range []string{"short", "correct horse", strings.Repeat("p", 72), strings.Repeat("p", 73), strings.Repeat("p", 1000)} {
		for _, email := range []string{"nobody@example.com", "ann@example.com"} {
			compared = nil
			_, err := a.LogIn(context.Background(), email, password, "127.0.0.1")
			if (password == "correct horse" && email == "ann@example.com") != (err == nil) || err != nil && !errors.Is(err, models.ErrBadCredentials) {
				t.Fatalf("LogIn(%s, %d bytes) = %v", email, len(password), err)
			}
			if len(compared) != 1 {
				t.Fatalf("LogIn(%s, %d bytes) made %d bcrypt comparisons, want 1", email, len(password), len(compared))
			}
			if got, _ := bcrypt.Cost(compared[0]); got != cost {
				t.Fatalf("LogIn(%s, %d bytes) compared at cost %d, want %d", email, len(password), got, cost)
			}
			if email == "nobody@example.com" && !bytes.Equal(compared[0], a.dummyHash) {
				t.Fatalf("LogIn(%s) compared with %q, not the dummy hash", email, compared[0])
			}
		}
	}
}
