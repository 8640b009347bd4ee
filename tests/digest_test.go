package tests

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The key table keeps a hash of every request it saw, for a day: with a
// SESSION_SECRET (every deployment has one), those hashes are keyed, so a
// reader of the table cannot test guesses of the passwords a password
// change sent. The change still replays to a double-click.
func TestKeyTableTellsNothingOfAPasswordChange(t *testing.T) {
	e := newEnv(t, func(d *setup) { d.SessionSecret = []byte(strings.Repeat("s", 32)) })
	e.signUp("ann@example.com")
	s := e.shopper()
	if r := s.post("/login", url.Values{"email": {"ann@example.com"}, "password": {webPassword}}); r.Status != http.StatusSeeOther {
		t.Fatalf("log in: %d %s", r.Status, r.Body)
	}
	page := s.get("/account/password")
	change := url.Values{"idempotency_key": {formKey(t, page)}, "current_password": {webPassword}, "new_password": {"a new password"}}
	for i := range 2 { // the change, then a double-click's replay
		r := s.post("/account/password", change)
		isPage(t, r, http.StatusOK, "Password changed.")
		if r.replayed() != (i == 1) {
			t.Fatalf("submission %d: replayed=%v", i+1, r.replayed())
		}
	}
	var rows []struct {
		Fingerprint string
		RawDigest   []byte
	}
	if err := e.db.Table("idempotency_keys").Where("route = ?", "/account/password").Find(&rows).Error; err != nil || len(rows) != 1 {
		t.Fatalf("the change's key rows: %v, %v; want one", rows, err)
	}
	row := rows[0]
	if !strings.HasPrefix(row.Fingerprint, "h1.") {
		t.Fatalf("fingerprint %q: want the keyed form (h1.…), not a plain SHA-256", row.Fingerprint)
	}
	// That the keyed hashes are not the plain ones of the same request is
	// checked in the middleware, which can compute those:
	// TestKeyedDigestsTellNothingOfTheBody.
	if len(row.RawDigest) != 32 {
		t.Fatalf("raw digest of %d bytes, want an HMAC-SHA256", len(row.RawDigest))
	}
}
