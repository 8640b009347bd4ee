package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// keyStateOf reads the state the keys listing gives one key.
func (e *env) keyStateOf(token, key string) string {
	e.t.Helper()
	r := e.do(request{method: "GET", path: "/api/v1/idempotency-keys", token: token})
	var list struct {
		Keys []struct{ Key, State string } `json:"idempotency_keys"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil {
		e.t.Fatalf("keys: %v %s", err, r.Body)
	}
	for _, k := range list.Keys {
		if k.Key == key {
			return k.State
		}
	}
	e.t.Fatalf("key %q is not listed: %s", key, r.Body)
	return ""
}

// A payment answered 502 whose key could not be released (the database
// link was cut) leaves its key in progress with nobody holding it. Once its
// lease passes the listing calls it released, and the retry with another
// card, which the README allows for a released key, pays the order once.
func TestKeyWhoseReleaseFailedIsReleasedOnceItsLeasePasses(t *testing.T) {
	e := newEnv(t)
	err := e.db.Callback().Raw().Before("gorm:raw").Register("test:fail-release", func(tx *gorm.DB) {
		if strings.Contains(tx.Statement.SQL.String(), "SET owner_token = ''") {
			_ = tx.AddError(errors.New("test: the database link is cut"))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	token := e.signUp("ann@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	pay := func(method string) response {
		return e.do(request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("pay"), body: payBody(method)})
	}
	isProblem(t, pay(payments.MethodUnavailable), http.StatusBadGateway, "/problems/payment-provider-unavailable")
	if state := e.keyStateOf(token, "pay"); state != "in_progress" {
		t.Fatalf("state %q while the lease runs, want in_progress", state)
	}
	e.clock.Advance(e.deps.Lease)
	if state := e.keyStateOf(token, "pay"); state != "released" {
		t.Fatalf("state %q once the lease passed, want released", state)
	}
	if r := pay(payments.MethodVisa); r.Status != http.StatusCreated {
		t.Fatalf("retry with another card: %d %s", r.Status, r.Body)
	}
	if n, paid := e.charges(), e.count("orders", "id = ? AND status = ?", orderID, "paid"); n != 1 || paid != 1 {
		t.Fatalf("%d charges, order paid %d; want one charge and the order paid", n, paid)
	}
}

// A stored problem's Cache-Control: no-store is part of its answer and is
// replayed with it; a 502, API or page, says when to retry.
func TestReplaysKeepNoStoreAndOutagesSayWhenToRetry(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("ann@example.com")
	ids := e.products()
	orderID := e.createOrder(token, "order", orderBody(ids[0], 1))
	pay := func(k, method string) response {
		return e.do(request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key(k), body: payBody(method)})
	}
	for _, step := range []struct {
		key, method, typ string
		status           int
	}{
		{"declined", payments.MethodDeclined, "/problems/payment-declined", http.StatusPaymentRequired},
		{"paid", payments.MethodVisa, "", http.StatusCreated},
		{"again", payments.MethodVisa, "/problems/order-already-paid", http.StatusConflict},
	} {
		if step.typ == "" {
			if r := pay(step.key, step.method); r.Status != step.status {
				t.Fatalf("%s: %d %s", step.key, r.Status, r.Body)
			}
			continue
		}
		for _, replay := range []bool{false, true} {
			r := pay(step.key, step.method)
			isProblem(t, r, step.status, step.typ)
			if r.replayed() != replay || r.Header.Get("Cache-Control") != "no-store" {
				t.Fatalf("%s (replayed %v): Cache-Control %q, want no-store", step.key, r.replayed(), r.Header.Get("Cache-Control"))
			}
		}
	}
	if n := e.count("simulated_charges"); n != 2 {
		t.Fatalf("%d provider charges (declined and succeeded), want 2", n)
	}

	other := e.createOrder(token, "other", orderBody(ids[1], 1))
	r := e.do(request{method: "POST", path: "/api/v1/orders/" + other + "/payments", token: token, key: key("outage"), body: payBody(payments.MethodUnavailable)})
	isProblem(t, r, http.StatusBadGateway, "/problems/payment-provider-unavailable")
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("a 502 without Retry-After: %v", r.Header)
	}
	s := e.shopper()
	s.signUp("bob@example.com")
	orderPath := s.placeOrder(s.checkout(ids[0], 1))
	page := s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodUnavailable))
	isPage(t, page, http.StatusBadGateway)
	if page.Header.Get("Retry-After") == "" {
		t.Fatalf("a 502 page without Retry-After: %v", page.Header)
	}
}

// Made-up methods and huge paths cannot grow the metrics or the log: a
// method outside the standard set is counted as "other", and the log line
// keeps only the start of the method and the path.
func TestClientInputIsBoundedInMetricsAndLogs(t *testing.T) {
	var logs testkit.Buffer
	e := newEnv(t, func(d *setup) { d.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	huge := strings.Repeat("M", 200_000)
	methods := []string{huge}
	for i := range 200 {
		methods = append(methods, fmt.Sprintf("M%03d", i))
	}
	if r := e.do(request{method: "GET", path: "/" + strings.Repeat("p", 100_000)}); r.Status != http.StatusNotFound {
		t.Fatalf("a huge path: %d", r.Status)
	}
	// Small answers, each sent whole once its handler, and its log line,
	// are done.
	for _, m := range methods {
		if r := e.do(request{method: m, path: "/api/v1/products", offContract: true}); r.Status != http.StatusMethodNotAllowed {
			t.Fatalf("method %.20s: %d", m, r.Status)
		}
	}
	logged := logs.String()

	metrics := e.do(request{method: "GET", path: "/metrics"})
	methodLabel := regexp.MustCompile(`^shop_http_requests_total\{.*method="([^"]*)"`)
	seen := map[string]bool{}
	for line := range strings.Lines(string(metrics.Body)) {
		if m := methodLabel.FindStringSubmatch(line); m != nil {
			seen[m[1]] = true
		}
	}
	if !seen["other"] || !seen["GET"] || len(seen) != 2 {
		t.Fatalf("%d method labels (%.200v), want GET and other", len(seen), slices.Collect(maps.Keys(seen)))
	}
	if strings.Contains(string(metrics.Body), "M000") {
		t.Fatal("a made-up method is a label value")
	}

	requests := 0
	for line := range strings.Lines(logged) {
		var entry struct{ Msg, Method, Path string }
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatal(err)
		}
		if entry.Msg != "request" {
			continue
		}
		requests++
		if len(line) > 1024 || len(entry.Method) > 16+len("…") || len(entry.Path) > 256+len("…") {
			t.Fatalf("a log line of %d bytes, method %d, path %d: %.200s", len(line), len(entry.Method), len(entry.Path), line)
		}
	}
	if requests != len(methods)+1 {
		t.Fatalf("%d request lines, want %d", requests, len(methods)+1)
	}
}

// Sign-ups and log-ins are throttled per client address: past the limit,
// 429 with Retry-After, a problem for the API and a page for the browser,
// and nothing is done.
func TestCredentialsAreThrottledPerAddress(t *testing.T) {
	e := newEnv(t, func(d *setup) { d.CredentialsPerMinute = 3 })
	creds := `{"email":"ann@example.com","password":"correct horse"}`
	for _, path := range []string{"/api/v1/users", "/api/v1/tokens", "/api/v1/tokens"} {
		if r := e.do(request{method: "POST", path: path, body: creds}); r.Status != http.StatusCreated {
			t.Fatalf("%s: %d %s", path, r.Status, r.Body)
		}
	}
	before := e.sideEffects()
	tokens := e.count("api_tokens")
	for _, r := range []request{
		{method: "POST", path: "/api/v1/tokens", body: creds},
		{method: "POST", path: "/api/v1/users", body: `{"email":"bob@example.com","password":"correct horse"}`},
	} {
		got := e.do(r)
		isProblem(t, got, http.StatusTooManyRequests, "/problems/too-many-requests")
		if got.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: 429 without Retry-After", r.path)
		}
	}
	page := e.shopper().post("/login", url.Values{"email": {"ann@example.com"}, "password": {"correct horse"}})
	isPage(t, page, http.StatusTooManyRequests)
	if page.Header.Get("Retry-After") == "" || page.Header.Get("Set-Cookie") != "" {
		t.Fatalf("the 429 page: Retry-After %q, Set-Cookie %q", page.Header.Get("Retry-After"), page.Header.Get("Set-Cookie"))
	}
	if got := e.sideEffects(); got != before || e.count("api_tokens") != tokens {
		t.Fatalf("a throttled request wrote something: %+v, want %+v", got, before)
	}
}

// Failed log-ins are counted per account and address in the database, so
// two instances share the count: from the guessing address, past half the
// limit each try waits longer, and at the limit even the right password
// gets 429 with Retry-After, on either instance, until the window passes.
// An unknown email is throttled alike, so a 429 does not tell which
// accounts exist.
func TestFailedLogInsAreThrottledPerAccountAndAddressAcrossInstances(t *testing.T) {
	const failures, window = 4, 15 * time.Minute
	e := newEnv(t, func(d *setup) { d.LoginFailures, d.LoginFailureWindow = failures, window })
	other := httptest.NewServer(newServer(t, e.deps))
	t.Cleanup(other.Close)
	e.signUp("ann@example.com")
	for _, email := range []string{"ann@example.com", "nobody@example.com"} {
		for i := range failures {
			base := []string{e.url, other.URL}[i%2]
			if i > failures/2 { // slowed down: refused at once, let in after the wait
				r := logInAt(t, base, "", email, "wrong password")
				isProblem(t, r, http.StatusTooManyRequests, "/problems/too-many-requests")
				secs, _ := strconv.Atoi(r.Header.Get("Retry-After"))
				if want := 1 << (i - failures/2 - 1); secs != want || !strings.Contains(problemDetail(t, r), fmt.Sprintf("try again in %d second", want)) {
					t.Fatalf("failure %d: Retry-After %q, %q; want %d seconds, said alike", i+1, r.Header.Get("Retry-After"), problemDetail(t, r), want)
				}
				e.clock.Advance(time.Duration(secs) * time.Second)
			}
			isProblem(t, logInAt(t, base, "", email, "wrong password"), http.StatusUnauthorized, "/problems/bad-credentials")
		}
		for _, base := range []string{e.url, other.URL} {
			r := logInAt(t, base, "", email, "correct horse")
			isProblem(t, r, http.StatusTooManyRequests, "/problems/too-many-requests")
			if secs, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || secs < 1 || secs > int(window.Seconds()) {
				t.Fatalf("Retry-After %q, want 1–%d seconds", r.Header.Get("Retry-After"), int(window.Seconds()))
			}
		}
	}
	tokens := e.count("api_tokens")
	e.clock.Advance(window)
	if r := logInAt(t, other.URL, "", "ann@example.com", "correct horse"); r.Status != http.StatusCreated {
		t.Fatalf("after the window: %d %s", r.Status, r.Body)
	}
	if e.count("api_tokens") != tokens+1 {
		t.Fatal("the log-in after the window issued no token")
	}
}

// Someone who knows the owner's email guesses passwords from one address,
// on two instances, until refused. The owner, from another address, signs
// in at once on either instance, in the API and the browser, during the
// attack; the attacker stays refused, even with the right password.
func TestOwnerSignsInDuringAnAttack(t *testing.T) {
	const failures, window = 4, 15 * time.Minute
	e := newEnv(t, func(d *setup) { d.LoginFailures, d.LoginFailureWindow = failures, window })
	other := httptest.NewServer(newServer(t, e.deps))
	t.Cleanup(other.Close)
	e.signUp("owner@example.com")
	const attacker, owner = "127.0.0.3", "127.0.0.2"
	refused := 0
	for i := range 3 * failures {
		r := logInAt(t, []string{e.url, other.URL}[i%2], attacker, "owner@example.com", fmt.Sprint("a guess ", i))
		if r.Status == http.StatusTooManyRequests {
			refused++
			secs, _ := strconv.Atoi(r.Header.Get("Retry-After"))
			e.clock.Advance(time.Duration(min(secs, 60)) * time.Second)
		}
	}
	if refused == 0 {
		t.Fatal("the attacker was never refused")
	}
	tokens := e.count("api_tokens")
	for _, base := range []string{e.url, other.URL} {
		if r := logInAt(t, base, owner, "owner@example.com", "correct horse"); r.Status != http.StatusCreated {
			t.Fatalf("the owner, from another address, during the attack: %d %s", r.Status, r.Body)
		}
		isProblem(t, logInAt(t, base, attacker, "owner@example.com", "correct horse"), http.StatusTooManyRequests, "/problems/too-many-requests")
	}
	if got := e.count("api_tokens"); got != tokens+2 {
		t.Fatalf("%d tokens issued to the owner, want 2", got-tokens)
	}
	page := e.shopper().post("/login", url.Values{"email": {"owner@example.com"}, "password": {"correct horse"}})
	if page.Status != http.StatusSeeOther {
		t.Fatalf("the owner's browser, from 127.0.0.1: %d, want signed in", page.Status)
	}
}

// The per-address limit is one count in the database: two instances let
// an address make CredentialsPerMinute requests in all, not each, and
// another address is not affected.
func TestAddressLimitIsSharedByInstances(t *testing.T) {
	const perMinute = 4
	e := newEnv(t, func(d *setup) { d.CredentialsPerMinute = perMinute })
	other := httptest.NewServer(newServer(t, e.deps))
	t.Cleanup(other.Close)
	e.signUp("ann@example.com") // one request of the minute, and its token another
	allowed := 2
	for i := 0; i < 2*perMinute; i++ {
		if logInAt(t, []string{e.url, other.URL}[i%2], "", "ann@example.com", "correct horse").Status == http.StatusCreated {
			allowed++
		}
	}
	if allowed != perMinute {
		t.Fatalf("%d credential requests allowed on two instances, want %d in all", allowed, perMinute)
	}
	if r := logInAt(t, other.URL, "127.0.0.2", "ann@example.com", "correct horse"); r.Status != http.StatusCreated {
		t.Fatalf("another address: %d", r.Status)
	}
	e.clock.Advance(time.Minute)
	if r := logInAt(t, other.URL, "", "ann@example.com", "correct horse"); r.Status != http.StatusCreated {
		t.Fatalf("the next minute: %d", r.Status)
	}
}

// logInAt asks base for a token, from the loopback address from.
func logInAt(t *testing.T, base, from, email, password string) response {
	t.Helper()
	r, err := sendTo(base, request{method: "POST", path: "/api/v1/tokens", from: from, body: fmt.Sprintf(`{"email":%q,"password":%q}`, email, password)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// problemDetail is a problem document's detail.
func problemDetail(t *testing.T, r response) string {
	detail, _ := r.json(t)["detail"].(string)
	return detail
}

// payments.provider_key is unique on both databases: the index exists, and
// a second row with the same provider key is refused as a duplicate.
func TestPaymentProviderKeyIsUnique(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("ann@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	if !e.db.Migrator().HasIndex(&models.Payment{}, "ProviderKey") {
		t.Fatal("payments has no index on provider_key")
	}
	payment := func() *models.Payment {
		return &models.Payment{
			ID: uuid.NewString(), OrderID: orderID, Status: models.Declined, AmountCents: 1, Currency: "EUR",
			PaymentMethod: payments.MethodDeclined, ProviderChargeID: "ch_1", ProviderKey: "idem_same",
		}
	}
	if err := e.db.Create(payment()).Error; err != nil {
		t.Fatal(err)
	}
	if err := e.db.Create(payment()).Error; !errors.Is(err, gorm.ErrDuplicatedKey) {
		t.Fatalf("a second payment with the same provider key: %v, want a duplicate-key error", err)
	}
	if n := e.count("payments"); n != 1 {
		t.Fatalf("%d payments, want 1", n)
	}
}

// Settle checks that the settling operation still holds the order: one
// whose hold passed to another operation records nothing, paid or
// declined, and leaves the attempt in doubt.
func TestSettleNeedsTheOrdersHold(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("ann@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	shop := billing.Ledger{DB: e.db}
	user := e.userID("ann@example.com")
	now := e.clock.Now()
	start, err := shop.BeginPayment(context.Background(), user, orderID, "idem_this", "idem_this/run", payments.MethodVisa, now, now.Add(time.Minute))
	if err != nil || start.Unresolved {
		t.Fatalf("begin: %+v %v", start, err)
	}
	other := "idem_other_operation"
	if err := e.db.Model(&models.Order{}).Where("id = ?", orderID).Update("held_by", other).Error; err != nil {
		t.Fatal(err)
	}
	for _, status := range []models.State{models.Succeeded, models.Declined} {
		err := e.db.Transaction(func(tx *gorm.DB) error {
			_, err := shop.Settle(tx, start.Row, billing.Outcome{State: status, ProviderID: "ch_" + string(status)}, "idem_this/run")
			return err
		})
		if !errors.Is(err, models.ErrPaymentInProgress) {
			t.Fatalf("settling as %s without the hold: %v, want payment in progress", status, err)
		}
	}
	var after models.Order
	if err := e.db.Where("id = ?", orderID).Take(&after).Error; err != nil {
		t.Fatal(err)
	}
	if n := e.count("payments"); n != 0 || after.Status != models.OrderPending || after.HeldBy == nil || *after.HeldBy != other {
		t.Fatalf("%d payments, order %s held by %v; want none recorded and the other operation's hold kept", n, after.Status, after.HeldBy)
	}
	if e.count("payment_attempts", "state = ?", models.InDoubt) != 1 {
		t.Fatal("the attempt is no longer in doubt")
	}
}

// userID is the id of the user with the email.
func (e *env) userID(email string) string {
	e.t.Helper()
	var id string
	if err := e.db.Model(&models.User{}).Where("email = ?", email).Pluck("id", &id).Error; err != nil || id == "" {
		e.t.Fatalf("user %s: %v", email, err)
	}
	return id
}
