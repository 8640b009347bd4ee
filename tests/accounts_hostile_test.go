package tests

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"golang.org/x/crypto/bcrypt"

	"github.com/shop/shop/models"
)

// An email whose bytes are not UTF-8 is refused (4xx) on every route that
// takes one, and nothing is written: no user, no token, no session, no
// failed log-in. Lower-casing used to turn each invalid byte into U+FFFD,
// so that other invalid bytes logged into the account stored that way, as
// the last release may hold one.
func TestEmailsThatAreNotUTF8AreRefused(t *testing.T) {
	e := newEnv(t)
	for _, body := range []string{"{\"email\":\"\xff@x.com\",\"password\":\"correct horse\"}", `{"email":"\ufffd@x.com","password":"correct horse"}`} {
		if r := e.do(request{method: "POST", path: "/api/v1/users", body: body, offContract: true}); r.Status < 400 || r.Status >= 500 {
			t.Fatalf("sign-up with %q: %d %s, want 4xx", body, r.Status, r.Body)
		}
	}
	if r := e.shopper().post("/signup", url.Values{"email": {"\xff@x.com"}, "password": {webPassword}}); r.Status < 400 || r.Status >= 500 {
		t.Fatalf("the sign-up form with %%ff@x.com: %d, want 4xx", r.Status)
	}
	if n := e.count("users"); n != 0 {
		t.Fatalf("%d users after refused sign-ups, want 0", n)
	}

	hash, err := bcrypt.GenerateFromPassword([]byte(webPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.Create(&models.User{ID: uuid.NewString(), Email: "\ufffd@x.com", PasswordHash: string(hash)}).Error; err != nil {
		t.Fatal(err)
	}
	token := "{\"email\":\"\xfe@x.com\",\"password\":\"correct horse\"}"
	if r := e.do(request{method: "POST", path: "/api/v1/tokens", body: token, offContract: true}); r.Status < 400 || r.Status >= 500 {
		t.Fatalf("a token for other invalid bytes: %d %s, want 4xx", r.Status, r.Body)
	}
	if r := e.shopper().post("/login", url.Values{"email": {"\xfe@x.com"}, "password": {webPassword}}); r.Status < 400 || r.Status >= 500 {
		t.Fatalf("the log-in form with %%fe@x.com: %d, want 4xx", r.Status)
	}
	for _, table := range []string{"api_tokens", "sessions", "login_failures"} {
		if n := e.count(table); n != 0 {
			t.Fatalf("%d rows in %s after refused log-ins, want 0", n, table)
		}
	}
}

// Payments to orders that do not exist are refused (404), each with its
// own key, and leave no row in idempotency_keys: a signed-in user cannot
// grow the table by sending them.
func TestPaymentsToOrdersThatDoNotExistLeaveNoKeyRows(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("ann@example.com")
	before := e.sideEffects()
	for i := range 100 {
		r := e.do(request{method: "POST", path: "/api/v1/orders/" + uuid.NewString() + "/payments", token: token, key: key(fmt.Sprintf("nowhere-%d", i)), body: payBody("pm_card_visa")})
		isProblem(t, r, http.StatusNotFound, "/problems/not-found")
	}
	if after := e.sideEffects(); after != before {
		t.Fatalf("100 refused payments wrote: %+v, then %+v", before, after)
	}
}

// A sign-up retried with its key gets the original 201, replayed: one
// user. The key's row keeps neither the password nor a hash of it that can
// be computed without the server's secret.
func TestSignUpRetriedWithItsKeyReplays(t *testing.T) {
	e := newEnv(t, func(d *setup) { d.SessionSecret = []byte(strings.Repeat("s", 32)) })
	const password = "a sign-up password"
	body := fmt.Sprintf(`{"email":"ann@example.com","password":%q}`, password)
	first := e.do(request{method: "POST", path: "/api/v1/users", key: key("signup-1"), body: body})
	again := e.do(request{method: "POST", path: "/api/v1/users", key: key("signup-1"), body: body})
	if first.Status != http.StatusCreated || again.Status != http.StatusCreated || !again.replayed() || string(again.Body) != string(first.Body) {
		t.Fatalf("sign-up %d %s, then %d (replayed %v) %s; want the 201 replayed", first.Status, first.Body, again.Status, again.replayed(), again.Body)
	}
	if n := e.count("users"); n != 1 {
		t.Fatalf("%d users, want 1", n)
	}
	var row struct {
		Fingerprint string
		Body        []byte
	}
	if err := e.db.Table("idempotency_keys").Select("fingerprint, body").Take(&row).Error; err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(row.Body), password) || !strings.HasPrefix(row.Fingerprint, "h1.") {
		t.Fatalf("the key's row: fingerprint %q, body %s", row.Fingerprint, row.Body)
	}
	isProblem(t, e.do(request{method: "POST", path: "/api/v1/users", body: body}), http.StatusConflict, "/problems/email-taken")
}
