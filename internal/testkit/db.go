// Package testkit is what the test suites share: a fresh, empty database
// for each test — an SQLite file by default, or a PostgreSQL schema when
// TEST_DATABASE_URL is set, so that the same tests run on both — and a
// controllable clock.
package testkit

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/shop/shop/database"
)

// URL makes a fresh database for the test and returns its URL; it is
// dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	base := strings.TrimSpace(os.Getenv("TEST_DATABASE_URL"))
	if base == "" {
		return filepath.Join(t.TempDir(), "shop.db")
	}
	admin, err := database.Open(base, database.Options{})
	if err != nil {
		t.Fatalf("TEST_DATABASE_URL is set but PostgreSQL cannot be opened: %v", err)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	schema := "t_" + hex.EncodeToString(suffix)
	if err := admin.Exec("CREATE SCHEMA " + schema).Error; err != nil {
		t.Fatalf("TEST_DATABASE_URL is set but PostgreSQL refused a schema: %v", err)
	}
	t.Cleanup(func() {
		admin.Exec("DROP SCHEMA " + schema + " CASCADE")
		closeDB(admin)
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// GroupCommit is SQLITE_GROUP_COMMIT's default, which tests open their
// databases with. It is not read from config.Default: the middleware's own
// tests use this package, and config imports the middleware. A test holds
// the two equal (TestGroupCommitIsTheConfigDefault).
const GroupCommit = 32

// Open opens a database URL for the rest of the test.
func Open(t testing.TB, databaseURL string) *gorm.DB {
	t.Helper()
	db, err := database.Open(databaseURL, database.Options{GroupCommit: GroupCommit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeDB(db) })
	return db
}

// NewDB opens a fresh database for the test.
func NewDB(t testing.TB) *gorm.DB {
	t.Helper()
	return Open(t, URL(t))
}

func closeDB(db *gorm.DB) { _ = database.Close(db) }
