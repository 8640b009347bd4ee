package tests

import (
	"net/http"
	"testing"
	"time"

	"github.com/shop/shop/models"
)

func withTokenTTL(d time.Duration) option {
	return func(deps *setup) { deps.TokenTTL = d }
}

// token gets a token for an existing account, and its stored row.
func (e *env) token(email string) (string, models.APIToken) {
	e.t.Helper()
	r := e.do(request{method: "POST", path: "/api/v1/tokens", body: `{"email":"` + email + `","password":"correct horse"}`})
	if r.Status != http.StatusCreated {
		e.t.Fatalf("token: %d %s", r.Status, r.Body)
	}
	body := r.json(e.t)
	var rows []models.APIToken
	if err := e.db.Order("id").Find(&rows).Error; err != nil || len(rows) == 0 {
		e.t.Fatalf("token rows: %v %v", rows, err)
	}
	row := rows[len(rows)-1]
	if row.ExpiresAt == nil || body["expires_at"] != row.ExpiresAt.UTC().Format(time.RFC3339) {
		e.t.Fatalf("expires_at %v, stored %v", body["expires_at"], row.ExpiresAt)
	}
	return body["token"].(string), row
}

// A token works for TOKEN_TTL (30 days by default), says so in
// expires_at, and then is refused as expired; nothing is written with it.
func TestTokensExpire(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []option
		ttl  time.Duration
	}{
		{"default 30 days", nil, 30 * 24 * time.Hour},
		{"TOKEN_TTL=1h", []option{withTokenTTL(time.Hour)}, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts...)
			e.signUp("ann@example.com")
			token, row := e.token("ann@example.com")
			if want := e.clock.Now().Add(tc.ttl); row.ExpiresAt.Sub(want).Abs() > time.Second {
				t.Fatalf("expires at %v, want %v", row.ExpiresAt, want)
			}
			me := e.do(request{method: "GET", path: "/api/v1/me", token: token})
			var user models.User
			e.db.Where("email = ?", "ann@example.com").Take(&user)
			if me.Status != http.StatusOK || me.json(t)["id"] != user.ID || me.json(t)["email"] != user.Email {
				t.Fatalf("/me: %d %s, want %s", me.Status, me.Body, user.ID)
			}

			e.clock.Advance(row.ExpiresAt.Sub(e.clock.Now()) - time.Second)
			if r := e.do(request{method: "GET", path: "/api/v1/me", token: token}); r.Status != http.StatusOK {
				t.Fatalf("a second before expiry: %d %s", r.Status, r.Body)
			}
			e.clock.Advance(time.Second)
			before := e.sideEffects()
			isProblem(t, e.do(request{method: "GET", path: "/api/v1/me", token: token}), http.StatusUnauthorized, "/problems/token-expired")
			r := e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("late"), body: orderBody(e.products()[0], 1)})
			isProblem(t, r, http.StatusUnauthorized, "/problems/token-expired")
			if got := r.Header.Get("WWW-Authenticate"); got != `Bearer realm="shop", error="invalid_token"` {
				t.Fatalf("WWW-Authenticate %q", got)
			}
			if got := e.sideEffects(); got != before {
				t.Fatalf("an expired token wrote %+v, want %+v", got, before)
			}
			// A new token works again.
			fresh, _ := e.token("ann@example.com")
			if r := e.do(request{method: "GET", path: "/api/v1/me", token: fresh}); r.Status != http.StatusOK {
				t.Fatalf("new token: %d", r.Status)
			}
		})
	}
}

// DELETE /api/v1/tokens/current revokes the token it is sent with, and only
// that one; a revoked token is refused as revoked.
func TestTokenRevocation(t *testing.T) {
	e := newEnv(t)
	phone := e.signUp("ann@example.com")
	laptop, laptopRow := e.token("ann@example.com")
	other := e.signUp("bob@example.com")

	r := e.do(request{method: "DELETE", path: "/api/v1/tokens/current", token: phone})
	if r.Status != http.StatusNoContent || len(r.Body) != 0 {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	var revoked []models.APIToken
	e.db.Where("revoked_at IS NOT NULL").Find(&revoked)
	if len(revoked) != 1 || revoked[0].ID == laptopRow.ID || revoked[0].RevokedAt.Sub(e.clock.Now()).Abs() > time.Millisecond {
		t.Fatalf("revoked rows %+v, want only the phone's, at %v", revoked, e.clock.Now())
	}
	before := e.sideEffects()
	isProblem(t, e.do(request{method: "GET", path: "/api/v1/me", token: phone}), http.StatusUnauthorized, "/problems/token-revoked")
	isProblem(t, e.do(request{method: "POST", path: "/api/v1/orders", token: phone, key: key("after-revoke"), body: orderBody(e.products()[0], 1)}),
		http.StatusUnauthorized, "/problems/token-revoked")
	isProblem(t, e.do(request{method: "DELETE", path: "/api/v1/tokens/current", token: phone}), http.StatusUnauthorized, "/problems/token-revoked")
	if got := e.sideEffects(); got != before {
		t.Fatalf("a revoked token wrote %+v, want %+v", got, before)
	}
	for _, token := range []string{laptop, other} {
		if r := e.do(request{method: "GET", path: "/api/v1/me", token: token}); r.Status != http.StatusOK {
			t.Fatalf("another token stopped working: %d %s", r.Status, r.Body)
		}
	}
	isProblem(t, e.do(request{method: "DELETE", path: "/api/v1/tokens/current"}), http.StatusUnauthorized, "/problems/unauthorized")
	isProblem(t, e.do(request{method: "GET", path: "/api/v1/me", token: "shp_forged"}), http.StatusUnauthorized, "/problems/unauthorized")
}
