package tests

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shop/shop/config"
	"github.com/shop/shop/models"
)

// Browser sessions are rows on the server: logging out, a password change
// and idle or absolute expiry end them, and a copy of the cookie taken
// before is then worth nothing.

// copyOf is another browser holding a copy of the shopper's cookies, as
// one that lifted them would.
func (s *shopper) copyOf() *shopper {
	s.t.Helper()
	u, err := url.Parse(s.base)
	if err != nil {
		s.t.Fatal(err)
	}
	copied := s.e.shopperAt(s.base, http.DefaultTransport)
	copied.client.Jar.SetCookies(u, s.client.Jar.Cookies(u))
	return copied
}

// signedOut checks that the shopper is treated as signed out: a page sends
// to the log-in page, and a checkout form is refused and places nothing.
func signedOut(t *testing.T, s *shopper, form url.Values) {
	t.Helper()
	if r := s.get("/orders"); r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/login?next=/orders" {
		t.Fatalf("GET /orders: %d %q, want the log-in redirect", r.Status, r.Header.Get("Location"))
	}
	before := s.e.sideEffects()
	isPage(t, s.post("/orders", form), http.StatusUnauthorized, "Please log in", "Your session may have ended")
	if after := s.e.sideEffects(); after != before {
		t.Fatalf("a refused form wrote: side effects %+v, then %+v", before, after)
	}
}

func TestLogoutEndsTheSessionOnTheServer(t *testing.T) {
	e, ids, s := signedIn(t)
	copied := s.copyOf()
	isPage(t, copied.get("/orders"), http.StatusOK, "My orders") // the copy works while the session does
	form := copied.checkout(ids[0], 1)

	if r := s.post("/logout", url.Values{}); r.Status != http.StatusSeeOther {
		t.Fatalf("log out: %d %s", r.Status, r.Body)
	}
	if n := e.count("sessions"); n != 0 {
		t.Fatalf("%d sessions after the only one logged out, want 0", n)
	}
	signedOut(t, copied, form)
	signedOut(t, s, form)
	if n := e.count("orders"); n != 0 {
		t.Fatalf("%d orders, want none", n)
	}
}

// Log-in issues a new token (no session fixation): the session the browser
// had before is ended, and a copy of its cookie signs no one in.
func TestLogInIssuesANewSession(t *testing.T) {
	e, ids, s := signedIn(t)
	before := s.copyOf()
	form := before.checkout(ids[0], 1)
	e.shopper().signUp("bob@example.com")
	r := s.post("/login", url.Values{"email": {"bob@example.com"}, "password": {webPassword}})
	if r.Status != http.StatusSeeOther {
		t.Fatalf("log in: %d %s", r.Status, r.Body)
	}
	u, _ := url.Parse(s.base)
	if was, now := before.client.Jar.Cookies(u)[0].Value, sessionCookieOf(t, r).Value; was == now {
		t.Fatal("log-in kept the session token the browser had")
	}
	isPage(t, s.get("/orders"), http.StatusOK, "bob@example.com")
	signedOut(t, before, form)
	if n := e.count("sessions"); n != 2 {
		t.Fatalf("%d sessions, want 2: bob's two, ann's ended", n)
	}
}

// A password change ends every session of the user, this browser's
// included (its cookie may be a thief's copy too), and every bearer token,
// and signs this browser in again with a new session. A double-click's
// second submission is replayed without a cookie: the browser keeps the one
// the first answer set; sent with the old cookie after the first answer, it
// is refused like any request of an ended session, and writes nothing.
func TestPasswordChangeEndsEverySessionAndSignsThisBrowserInAgain(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("ann@example.com") // webPassword, and a bearer token
	here, there := e.shopper(), e.shopper()
	for _, s := range []*shopper{here, there} {
		if r := s.post("/login", url.Values{"email": {"ann@example.com"}, "password": {webPassword}}); r.Status != http.StatusSeeOther {
			t.Fatalf("log in: %d %s", r.Status, r.Body)
		}
	}
	copied := here.copyOf() // this browser's cookie, as a thief would hold it
	form := there.checkout(e.products()[0], 1)
	if r := e.do(request{method: "GET", path: "/api/v1/me", token: token}); r.Status != http.StatusOK {
		t.Fatalf("the token before: %d %s", r.Status, r.Body)
	}

	page := here.get("/account/password")
	isPage(t, page, http.StatusOK, "Current password", "New password")
	change := url.Values{"idempotency_key": {formKey(t, page)}, "current_password": {"not my password"}, "new_password": {"a new password"}}
	isPage(t, here.post("/account/password", change), http.StatusUnprocessableEntity, "The password is not your current password", formKey(t, page))
	change.Set("current_password", webPassword)
	change.Set("new_password", "short")
	isPage(t, here.post("/account/password", change), http.StatusUnprocessableEntity, "The new password must be at least 8 characters")
	if n, revoked := e.count("sessions"), e.count("api_tokens", "revoked_at IS NOT NULL"); n != 2 || revoked != 0 {
		t.Fatalf("refused changes left %d sessions (want 2) and revoked %d tokens (want 0)", n, revoked)
	}
	isPage(t, there.get("/orders"), http.StatusOK, "My orders")

	change.Set("new_password", "a new password")
	r := here.post("/account/password", change)
	isPage(t, r, http.StatusOK, "Password changed.")
	u, _ := url.Parse(e.url)
	if was := copied.client.Jar.Cookies(u)[0].Value; sessionCookieOf(t, r).Value == was {
		t.Fatal("the change kept this browser's session token")
	}
	replay := here.post("/account/password", change) // sent again with the new cookie
	isPage(t, replay, http.StatusOK, "Password changed.")
	if !replay.replayed() || replay.Header.Get("Set-Cookie") != "" {
		t.Fatalf("the second submission: replayed=%v, Set-Cookie %q; want a replay without a cookie", replay.replayed(), replay.Header.Get("Set-Cookie"))
	}
	isPage(t, here.get("/orders"), http.StatusOK, "My orders") // signed in again, with the new cookie
	before := e.sideEffects()
	isPage(t, copied.post("/account/password", change), http.StatusUnauthorized, "Please log in")
	if after := e.sideEffects(); after != before {
		t.Fatalf("a submission with the old cookie wrote: %+v, then %+v", before, after)
	}
	signedOut(t, copied, form)
	signedOut(t, there, form)
	if n := e.count("sessions"); n != 1 {
		t.Fatalf("%d sessions after the change, want this browser's new one only", n)
	}
	if n := e.count("api_tokens", "revoked_at IS NOT NULL"); n != 1 {
		t.Fatalf("%d tokens revoked, want the user's one", n)
	}
	e.clock.Advance(config.Default().TokenCacheTTL) // past the lookup this instance cached
	if r := e.do(request{method: "GET", path: "/api/v1/me", token: token}); r.Status != http.StatusUnauthorized {
		t.Fatalf("the token after the change: %d %s, want 401", r.Status, r.Body)
	}
	for password, want := range map[string]int{webPassword: http.StatusUnprocessableEntity, "a new password": http.StatusSeeOther} {
		if r := e.shopper().post("/login", url.Values{"email": {"ann@example.com"}, "password": {password}}); r.Status != want {
			t.Fatalf("log in with %q: %d, want %d", password, r.Status, want)
		}
	}
	isPage(t, here.get("/account"), http.StatusOK, "Changed your password — your other browsers and apps were signed out (you sent it twice; it happened once).")
}

// A session alone (a lifted cookie) cannot guess the password through the
// change form: wrong current passwords count as failed log-ins of the
// account from that address, and past the limit even the right one is
// refused until the failures leave the window.
func TestPasswordChangeGuessesAreThrottled(t *testing.T) {
	const window = 15 * time.Minute
	e, _, s := signedIn(t, func(d *setup) { d.LoginFailures, d.LoginFailureWindow = 2, window })
	var before models.User
	if err := e.db.Take(&before).Error; err != nil {
		t.Fatal(err)
	}
	change := url.Values{"idempotency_key": {formKey(t, s.get("/account/password"))}, "current_password": {"guess one"}, "new_password": {"a new password"}}
	for _, guess := range []string{"guess one", "guess two"} {
		e.clock.Advance(time.Minute) // past the wait each failure adds
		change.Set("current_password", guess)
		isPage(t, s.post("/account/password", change), http.StatusUnprocessableEntity, "The password is not your current password")
	}
	e.clock.Advance(time.Minute)
	change.Set("current_password", webPassword)
	r := s.post("/account/password", change)
	isPage(t, r, http.StatusTooManyRequests)
	var after models.User
	if err := e.db.Take(&after).Error; err != nil || after.PasswordHash != before.PasswordHash {
		t.Fatalf("a refused change changed the password (%v)", err)
	}
	if n := e.count("idempotency_keys"); n != 0 {
		t.Fatalf("%d key rows after refused changes, want none: a refused new operation is forgotten", n)
	}
	e.clock.Advance(window)
	isPage(t, s.post("/account/password", change), http.StatusOK, "Password changed.")
	isPage(t, s.get("/account"), http.StatusOK, "Changed your password — your other browsers and apps were signed out.")
}

func TestIdleAndOldSessionsEnd(t *testing.T) {
	const idle, maxAge = time.Hour, 3 * time.Hour
	e, ids, s := signedIn(t, func(d *setup) { d.SessionIdle, d.SessionMaxAge = idle, maxAge })
	form := s.checkout(ids[0], 1)
	// A request within the idle timeout keeps the session alive, up to its
	// absolute end: 150 minutes in, then 180.
	for range 3 {
		e.clock.Advance(50 * time.Minute)
		isPage(t, s.get("/orders"), http.StatusOK, "My orders")
	}
	e.clock.Advance(maxAge - 150*time.Minute)
	signedOut(t, s.copyOf(), form)

	s = e.shopper()
	if r := s.post("/login", url.Values{"email": {"ann@example.com"}, "password": {webPassword}}); r.Status != http.StatusSeeOther {
		t.Fatalf("log in: %d %s", r.Status, r.Body)
	}
	e.clock.Advance(idle - time.Second)
	isPage(t, s.copyOf().get("/orders"), http.StatusOK, "My orders")
	e.clock.Advance(idle)
	signedOut(t, s, form)
	if n := e.count("sessions"); n != 0 {
		t.Fatalf("%d sessions left, want the ones that ran out deleted", n)
	}
}

func TestSweepDeletesSessionsThatRanOut(t *testing.T) {
	e, _, _ := signedIn(t, func(d *setup) { d.SessionIdle = time.Hour })
	e.shopper().signUp("bob@example.com")
	e.clock.Advance(59 * time.Minute)
	e.shopper().signUp("cy@example.com")
	e.clock.Advance(time.Minute)
	if n, err := e.server.SweepSessions(t.Context()); err != nil || n != 2 {
		t.Fatalf("swept %d (%v), want ann's and bob's sessions", n, err)
	}
	if n := e.count("sessions"); n != 1 {
		t.Fatalf("%d sessions left, want cy's", n)
	}
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

func TestSessionsTableHoldsHashesOnly(t *testing.T) {
	e := newEnv(t)
	cookie := sessionCookieOf(t, e.shopper().post("/signup", url.Values{"email": {"ann@example.com"}, "password": {webPassword}}))
	var rows []map[string]any
	if err := e.db.Table("sessions").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("%d sessions, want 1", len(rows))
	}
	for column, v := range rows[0] {
		if text := fmt.Sprint(v); len(text) >= 16 && strings.Contains(cookie.Value, text) || strings.Contains(text, cookie.Value) {
			t.Fatalf("column %s holds the cookie's value, or part of it: %q", column, text)
		}
	}
	if hash := fmt.Sprint(rows[0]["token_hash"]); !sha256Hex.MatchString(hash) {
		t.Fatalf("token_hash %q is not a SHA-256", hash)
	}
}
