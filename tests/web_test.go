package tests

import (
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/payments"
)

// The browser checkout: HTML forms whose hidden idempotency_key makes a
// double-click, a back-button resubmit or a refresh land on the same order.

func TestBrowserCheckoutPlacesAndPaysAnOrder(t *testing.T) {
	e, ids, s := signedIn(t)

	orderPath := s.placeOrder(s.checkout(ids[0], 2, ids[1], 1))
	page := s.get(orderPath)
	isPage(t, page, http.StatusOK, "Order #1001", "Awaiting payment", "<h2>Payments</h2>", `name="payment_method"`)
	if strings.Contains(string(page.Body), "checked") {
		t.Fatal("the pay form comes with a card already chosen")
	}
	hasNotice(t, page, "", "")

	r := s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodVisa))
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != orderPath {
		t.Fatalf("pay: %d %q %s", r.Status, r.Header.Get("Location"), r.Body)
	}
	page = s.get(orderPath)
	isPage(t, page, http.StatusOK, "charged to the Test Visa card.", `<a href="`+orderPath+`/receipt">Receipt for order #1001</a>`)
	hasNotice(t, page, "status", "Paid.")
	if strings.Contains(string(page.Body), "(is charged)") {
		t.Fatal("the payment history repeats the pay form's label")
	}
	if strings.Contains(string(page.Body), `name="payment_method"`) {
		t.Fatal("a paid order still shows the pay form")
	}
	if got := e.sideEffects(); got.orders != 1 || got.payments != 1 || e.charges() != 1 || got.storedKeys != 2 {
		t.Fatalf("side effects %+v, charges %d: want one order, one payment, one charge, two stored keys", got, e.charges())
	}
	isPage(t, s.get("/orders"), http.StatusOK, orderPath)
}

// signedIn starts a shop and a shopper signed in to it.
func signedIn(t *testing.T, opts ...option) (*env, []string, *shopper) {
	e := newEnv(t, opts...)
	s := e.shopper()
	s.signUp("ann@example.com")
	return e, e.products(), s
}

func TestEveryFormRenderHasAFreshKey(t *testing.T) {
	_, _, s := signedIn(t)
	first, second := formKey(t, s.get("/")), formKey(t, s.get("/"))
	if first == second {
		t.Fatalf("two renders of the catalog share the key %q", first)
	}
}

func TestDoubleClickedPlaceOrderMakesOneOrder(t *testing.T) {
	e, ids, s := signedIn(t)

	answers := s.postTogether(2, "/orders", s.checkout(ids[0], 1))
	for _, r := range answers {
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != answers[0].Header.Get("Location") {
			t.Fatalf("double-click answers differ or are not 303: %d %q / %d %q",
				answers[0].Status, answers[0].Header.Get("Location"), r.Status, r.Header.Get("Location"))
		}
	}
	if !answers[0].replayed() && !answers[1].replayed() {
		t.Fatal("neither answer of the double-click was a replay")
	}
	if n := e.count("orders"); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}

func TestDoubleClickedPayChargesOnce(t *testing.T) {
	// The first click is held at the provider until the second has found
	// its key in progress: the second waits, then gets the same 303.
	gate, g := withGate()
	e, ids, s := signedIn(t, gate)
	t.Cleanup(g.releaseAll)
	orderPath := s.placeOrder(s.checkout(ids[0], 1))
	form := s.payForm(orderPath, payments.MethodVisa)
	waiting := onWaiting(t, e.db)

	first := s.postAsync(orderPath+"/payments", form)
	testkit.Recv(t, g.entered, "the first click at the provider")
	second := s.postAsync(orderPath+"/payments", form)
	testkit.Recv(t, waiting, "the second click to wait")
	g.release(0)
	answers := []answerOf{testkit.Recv(t, first, "the first click's answer"), testkit.Recv(t, second, "the second click's answer")}
	for i, r := range answers {
		if r.err != nil || r.Status != http.StatusSeeOther || r.Header.Get("Location") != orderPath || r.replayed() != (i == 1) {
			t.Fatalf("click %d on Pay: %v %d %q replayed=%v %s", i+1, r.err, r.Status, r.Header.Get("Location"), r.replayed(), r.Body)
		}
	}
	if answers[0].replayed() == answers[1].replayed() {
		t.Fatal("want one click run and the other replayed")
	}
	if e.charges() != 1 || e.count("payments") != 1 || e.provider.Calls() != 1 {
		t.Fatalf("%d charges, %d payments, %d provider calls; want 1 each", e.charges(), e.count("payments"), e.provider.Calls())
	}
}

func TestBackButtonResubmitLandsOnTheSameOrder(t *testing.T) {
	e, ids, s := signedIn(t)
	form := s.checkout(ids[0], 3)
	orderPath := s.placeOrder(form)
	s.get(orderPath)

	// Back to the catalog page as it was, and submit it again.
	r := s.post("/orders", form)
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != orderPath || !r.replayed() {
		t.Fatalf("resubmit: %d %q replayed=%v, want the replayed 303 to %s", r.Status, r.Header.Get("Location"), r.replayed(), orderPath)
	}
	if n := e.count("orders"); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}

func TestRefreshResubmitOfPayChargesOnce(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := s.placeOrder(s.checkout(ids[0], 1))
	form := s.payForm(orderPath, payments.MethodVisa)

	for i := range 3 { // the submission, then two refreshes that resend it
		r := s.post(orderPath+"/payments", form)
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != orderPath || r.replayed() != (i > 0) {
			t.Fatalf("submission %d: %d %q replayed=%v", i, r.Status, r.Header.Get("Location"), r.replayed())
		}
	}
	if e.charges() != 1 || e.count("payments") != 1 {
		t.Fatalf("%d charges and %d payments, want 1 and 1", e.charges(), e.count("payments"))
	}
}

func TestInvalidCheckoutIsShownAgainAndNotStored(t *testing.T) {
	e, ids, s := signedIn(t)
	form := s.checkout()
	k := form.Get("idempotency_key")

	cases := []struct {
		quantity string
		says     string
	}{
		{"0", "Choose a quantity for at least one product."},
		{"00", "Choose a quantity for at least one product."},
		{"-0", "Choose a quantity for at least one product."},
		{"-1", "Enter a number from 0 to 10."},
		{"11", "Enter a number from 0 to 10."},
		{"two", "Enter a whole number."},
		{"1.5", "Enter a whole number."},
	}
	for _, tc := range cases {
		form.Set("qty-"+ids[0], tc.quantity)
		r := s.post("/orders", form)
		isPage(t, r, http.StatusUnprocessableEntity, tc.says, `value="`+k+`"`, `value="`+tc.quantity+`"`)
		if got := e.sideEffects(); got.orders != 0 || got.storedKeys != 0 {
			t.Fatalf("quantity %q: %+v, want no order and no stored answer", tc.quantity, got)
		}
	}
	form.Set("qty-unknown-product", "1")
	isPage(t, s.post("/orders", form), http.StatusUnprocessableEntity, "no longer in the catalog")
	form.Del("qty-unknown-product")

	// The corrected form succeeds with the same key, and stays succeeded.
	form.Set("qty-"+ids[0], "2")
	orderPath := s.placeOrder(form)
	if again := s.post("/orders", form); again.Header.Get("Location") != orderPath || !again.replayed() {
		t.Fatalf("the corrected form's repeat: %d %q", again.Status, again.Header.Get("Location"))
	}
	if n := e.count("orders"); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}

func TestPayFormWithoutAMethodIsShownAgain(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := s.placeOrder(s.checkout(ids[0], 1))
	form := s.payForm(orderPath, "")
	form.Del("payment_method")

	r := s.post(orderPath+"/payments", form)
	isPage(t, r, http.StatusUnprocessableEntity, form.Get("idempotency_key"), `aria-describedby="method-error"`, `id="method-error">Choose a card to pay with.`)
	hasNotice(t, r, "alert", "Nothing was charged: choose a card to pay with")
	if got := e.sideEffects(); got.payments != 0 || got.storedKeys != 1 || e.charges() != 0 || e.provider.Calls() != 0 {
		t.Fatalf("after a pay form without a card: %+v, %d charges, %d provider calls; want nothing written", got, e.charges(), e.provider.Calls())
	}
	form.Set("payment_method", payments.MethodVisa)
	if r := s.post(orderPath+"/payments", form); r.Status != http.StatusSeeOther {
		t.Fatalf("corrected pay form: %d %s", r.Status, r.Body)
	}
	if e.charges() != 1 {
		t.Fatalf("%d charges, want 1", e.charges())
	}
}

func TestReusedFormKeyShowsAPageNotJSON(t *testing.T) {
	e, ids, s := signedIn(t)
	form := s.checkout(ids[0], 1)
	s.placeOrder(form)

	// Back, change the quantity, submit the same form again.
	form.Set("qty-"+ids[0], "5")
	r := s.post("/orders", form)
	isPage(t, r, http.StatusUnprocessableEntity, `href="/orders"`, `href="/"`)
	hasNotice(t, r, "alert", "already sent with different contents")
	if n := e.count("orders"); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}

func TestPayStillRunningAfterTheWaitShowsAPage(t *testing.T) {
	// The first click is held at the provider, so the second's wait runs
	// out while it is still charging.
	gate, g := withGate()
	e, ids, s := signedIn(t, gate, withWait(50*time.Millisecond))
	t.Cleanup(g.releaseAll)
	orderPath := s.placeOrder(s.checkout(ids[0], 1))
	form := s.payForm(orderPath, payments.MethodVisa)

	first := s.postAsync(orderPath+"/payments", form)
	testkit.Recv(t, g.entered, "the first click at the provider")
	busy := s.post(orderPath+"/payments", form)
	isPage(t, busy, http.StatusConflict)
	hasNotice(t, busy, "alert", "still being processed")
	if retry := retryFields(t, busy); retry.Encode() != form.Encode() {
		t.Fatalf("the Check again button sends %v, want the same form %v", retry, form)
	}
	if busy.Header.Get("Retry-After") == "" {
		t.Fatal("the in-progress page has no Retry-After")
	}
	g.release(0)
	if r := testkit.Recv(t, first, "the first click's answer"); r.err != nil || r.Status != http.StatusSeeOther || r.Header.Get("Location") != orderPath {
		t.Fatalf("first click: %v %d %q %s", r.err, r.Status, r.Header.Get("Location"), r.Body)
	}
	if e.charges() != 1 || e.provider.Calls() != 1 {
		t.Fatalf("%d charges, %d provider calls; want 1 each", e.charges(), e.provider.Calls())
	}
}

func TestDeclinedAndAlreadyPaidShowOnTheOrderPage(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := s.placeOrder(s.checkout(ids[0], 1))

	if r := s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodDeclined)); r.Status != http.StatusSeeOther {
		t.Fatalf("declined: %d %s", r.Status, r.Body)
	}
	page := s.get(orderPath)
	isPage(t, page, http.StatusOK, `name="payment_method"`, "Declined")
	hasNotice(t, page, "alert", "Your card was declined. Nothing was charged: choose another card and pay again.")

	// Two tabs: both show the pay form; the second pays an order the first paid.
	tab1, tab2 := s.payForm(orderPath, payments.MethodVisa), s.payForm(orderPath, payments.MethodVisa)
	for _, form := range []url.Values{tab1, tab2} {
		if r := s.post(orderPath+"/payments", form); r.Status != http.StatusSeeOther || r.Header.Get("Location") != orderPath {
			t.Fatalf("pay: %d %s", r.Status, r.Body)
		}
	}
	hasNotice(t, s.get(orderPath), "status", "Already paid.") // what the second tab sees
	if e.charges() != 1 || e.count("payments") != 2 {
		t.Fatalf("%d charges and %d payments, want 1 charge (and the declined attempt)", e.charges(), e.count("payments"))
	}
}

func TestProviderOutageShowsAPageAndIsNotStored(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := s.placeOrder(s.checkout(ids[0], 1))
	form := s.payForm(orderPath, payments.MethodUnavailable)

	down := s.post(orderPath+"/payments", form)
	isPage(t, down, http.StatusBadGateway, `href="`+orderPath+`">Back to your order`)
	hasNotice(t, down, "alert", "Nothing was charged, try again")
	if retry := retryFields(t, down); retry.Encode() != form.Encode() {
		t.Fatalf("the Try again button sends %v, want the same form %v", retry, form)
	}
	if got := e.sideEffects(); got.payments != 0 || got.storedKeys != 1 || e.charges() != 0 {
		t.Fatalf("after the outage: %+v and %d charges, want nothing stored", got, e.charges())
	}
	// Back, another card, the same form key: the outage was not stored.
	form.Set("payment_method", payments.MethodVisa)
	if r := s.post(orderPath+"/payments", form); r.Status != http.StatusSeeOther {
		t.Fatalf("retry after the outage: %d %s", r.Status, r.Body)
	}
	if e.charges() != 1 {
		t.Fatalf("%d charges, want 1", e.charges())
	}
}

func TestShoppersAreIsolated(t *testing.T) {
	e := newEnv(t)
	ids := e.products()
	ann, bob := e.shopper(), e.shopper()
	ann.signUp("ann@example.com")
	bob.signUp("bob@example.com")
	annForm := ann.checkout(ids[0], 1)
	annOrder := ann.placeOrder(annForm)

	isPage(t, bob.get(annOrder), http.StatusNotFound, "belongs to another account")
	payAnn := url.Values{"idempotency_key": {"bob-key-1"}, "payment_method": {payments.MethodVisa}}
	isPage(t, bob.post(annOrder+"/payments", payAnn), http.StatusNotFound)
	// Bob's form with Ann's key is Bob's own operation: keys are per user.
	bobForm := url.Values{"idempotency_key": annForm["idempotency_key"], "qty-" + ids[0]: {"1"}}
	bobOrder := bob.placeOrder(bobForm)
	if bobOrder == annOrder {
		t.Fatal("Bob got Ann's order by sending her key")
	}
	if strings.Contains(string(bob.get("/orders").Body), annOrder) {
		t.Fatal("Bob's orders list Ann's order")
	}
	if e.count("orders") != 2 || e.charges() != 0 {
		t.Fatalf("%d orders and %d charges, want 2 and 0", e.count("orders"), e.charges())
	}
}

func TestCrossOriginPostsAreRefused(t *testing.T) {
	e, ids, s := signedIn(t)
	form := s.checkout(ids[0], 1)
	before := e.sideEffects()

	for _, header := range []http.Header{
		{"Sec-Fetch-Site": {"cross-site"}},
		{"Sec-Fetch-Site": {""}, "Origin": {"https://evil.example"}},
	} {
		for _, path := range []string{"/orders", "/logout", "/signup"} {
			r, err := s.send(http.MethodPost, path, form, header)
			if err != nil {
				t.Fatal(err)
			}
			isPage(t, r, http.StatusForbidden, "sent from another website")
		}
	}
	if got := e.sideEffects(); got != before {
		t.Fatalf("side effects %+v, want %+v", got, before)
	}
	isPage(t, s.get("/orders"), http.StatusOK, "My orders") // still signed in
}

func TestSessions(t *testing.T) {
	e := newEnv(t)
	ids := e.products()
	s := e.shopper()

	// Signed out: pages send to the log-in page, forms are refused.
	if r := s.get("/orders"); r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/login?next=/orders" {
		t.Fatalf("signed out /orders: %d %q", r.Status, r.Header.Get("Location"))
	}
	isPage(t, s.post("/orders", url.Values{"idempotency_key": {"k1"}, "qty-" + ids[0]: {"1"}}), http.StatusUnauthorized, "Log in")

	// Sign-up errors are shown inline; a double-submitted sign-up signs in.
	isPage(t, s.post("/signup", url.Values{"email": {"not an email"}, "password": {"short"}}), http.StatusUnprocessableEntity,
		"Email must be a valid email address", "Password must be at least 8 characters")
	signup := url.Values{"email": {"ann@example.com"}, "password": {webPassword}}
	for range 2 {
		if r := s.post("/signup", signup); r.Status != http.StatusSeeOther {
			t.Fatalf("sign up: %d %s", r.Status, r.Body)
		}
	}
	if n := e.count("users"); n != 1 {
		t.Fatalf("%d users, want 1", n)
	}
	isPage(t, e.shopper().post("/signup", url.Values{"email": {"ann@example.com"}, "password": {"another password"}}),
		http.StatusUnprocessableEntity, "already exists")

	// The cookie: HttpOnly, SameSite=Lax, not Secure over plain HTTP.
	cookie := sessionCookieOf(t, s.post("/login", url.Values{"email": {"ann@example.com"}, "password": {webPassword}}))
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Secure {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Lax, not Secure over HTTP", cookie)
	}

	// A tampered cookie is no session.
	forged := e.shopper()
	u, _ := url.Parse(e.url)
	forged.client.Jar.SetCookies(u, []*http.Cookie{{Name: cookie.Name, Value: cookie.Value[:len(cookie.Value)-2] + "xx"}})
	if r := forged.get("/orders"); r.Status != http.StatusSeeOther {
		t.Fatalf("forged cookie: %d, want the log-in redirect", r.Status)
	}

	// Wrong password: inline error, no cookie. The next path stays on this site.
	other := e.shopper()
	r := other.post("/login", url.Values{"email": {"ann@example.com"}, "password": {"wrong password"}, "next": {"/orders"}})
	isPage(t, r, http.StatusUnprocessableEntity, "Wrong email or password.", `value="/orders"`)
	if len(r.Header.Values("Set-Cookie")) != 0 {
		t.Fatalf("a failed log-in set a cookie: %v", r.Header.Values("Set-Cookie"))
	}
	for next, want := range map[string]string{
		"/orders": "/orders", "/orders/abc?x=1": "/orders/abc?x=1",
		"//evil.example/": "/", "https://evil.example/": "/", "/\\evil.example": "/", "/./\\evil.example": "/",
		"/\t/evil.example": "/", "/\n/evil.example": "/", "javascript:alert(1)": "/",
	} {
		r := other.post("/login", url.Values{"email": {"ann@example.com"}, "password": {webPassword}, "next": {next}})
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != want {
			t.Fatalf("log in with next=%q: %d %q, want %q", next, r.Status, r.Header.Get("Location"), want)
		}
	}

	// Log out ends the session.
	if r := s.post("/logout", url.Values{}); r.Status != http.StatusSeeOther {
		t.Fatalf("log out: %d", r.Status)
	}
	if r := s.get("/orders"); r.Status != http.StatusSeeOther {
		t.Fatalf("after log out /orders: %d, want the log-in redirect", r.Status)
	}
}

func TestSessionCookieIsSecureOverTLS(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewTLSServer(newServer(t, e.deps))
	t.Cleanup(srv.Close)
	s := e.shopperAt(srv.URL, srv.Client().Transport)
	r := s.post("/signup", url.Values{"email": {"ann@example.com"}, "password": {webPassword}})
	if cookie := sessionCookieOf(t, r); !cookie.Secure || !cookie.HttpOnly {
		t.Fatalf("session cookie over TLS %+v: want Secure and HttpOnly", cookie)
	}
}

func sessionCookieOf(t *testing.T, r response) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == "shop_session" {
			return c
		}
	}
	t.Fatalf("no session cookie in %d %v", r.Status, r.Header)
	return nil
}

// attributes are the links' and times' values, which a shopper does not read
// (an order's id may hold "303").
var attributes = regexp.MustCompile(`\s(href|datetime)="[^"]*"`)

func TestAccountActivityIsToldInShoppersWords(t *testing.T) {
	e, ids, s := signedIn(t)
	form := s.checkout(ids[0], 1)
	orderPath := s.placeOrder(form)
	s.placeOrder(form) // sent twice
	s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodDeclined))
	other := s.payForm(orderPath, payments.MethodUnavailable)
	s.post(orderPath+"/payments", other)
	s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodVisa))

	page := s.get("/account")
	isPage(t, page, http.StatusOK, "ann@example.com",
		`<a href="`+orderPath+`">Placed order #1001</a> — done (you sent it twice; it happened once).`,
		`<a href="`+orderPath+`">Tried to pay order #1001</a> — the card was declined, so nothing was charged.`,
		`<a href="`+orderPath+`">Tried to pay for order #1001</a> — it did not go through and nothing was saved, so you can send it again.`,
		`<a href="`+orderPath+`">Paid order #1001</a> — done.`)
	for _, developerWord := range []string{"POST", "/orders/:id", "303", "completed", "not done", "kept", form.Get("idempotency_key")[:8], other.Get("idempotency_key")[:8]} {
		if strings.Contains(attributes.ReplaceAllString(string(page.Body), ""), developerWord) {
			t.Fatalf("the activity page says %q:\n%s", developerWord, page.Body)
		}
	}
	// The developer's view stays in the API.
	if r := s.get("/requests"); r.Status != http.StatusNotFound {
		t.Fatalf("/requests: %d, want 404: the page moved to the account", r.Status)
	}
	if n := e.count("orders"); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}

func TestAFormSentTwiceIsToldOnTheOrderPage(t *testing.T) {
	e, ids, s := signedIn(t)
	form := s.checkout(ids[0], 1)
	orderPath := s.placeOrder(form)
	hasNotice(t, s.get(orderPath), "", "")

	again := s.post("/orders", form)
	if again.Status != http.StatusSeeOther || again.Header.Get("Location") != orderPath || !again.replayed() {
		t.Fatalf("the repeat: %d %q replayed=%v", again.Status, again.Header.Get("Location"), again.replayed())
	}
	hasNotice(t, s.get(orderPath), "status", "You sent the order form more than once; one order was placed.")
	hasNotice(t, s.get(orderPath), "", "") // said once

	pay := s.payForm(orderPath, payments.MethodVisa)
	for range 2 {
		s.post(orderPath+"/payments", pay)
	}
	hasNotice(t, s.get(orderPath), "status", "Paid. Thank you for your order: the payment went through. You sent the payment form more than once; it was processed once.")
	if got := e.sideEffects(); got.orders != 1 || got.payments != 1 || e.charges() != 1 {
		t.Fatalf("%+v, %d charges: want one order, one payment, one charge", got, e.charges())
	}
}

func TestSignedInShoppersSkipTheAccountForms(t *testing.T) {
	e := newEnv(t)
	s := e.shopper()
	// next is kept from the log-in page through sign-up.
	isPage(t, s.get("/login?next=/orders"), http.StatusOK, `href="/signup?next=%2forders"`)
	isPage(t, s.get("/signup?next=/orders"), http.StatusOK, `name="next" value="/orders"`)
	r := s.post("/signup", url.Values{"email": {"ann@example.com"}, "password": {webPassword}, "next": {"/orders"}})
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/orders" {
		t.Fatalf("sign up with next=/orders: %d %q", r.Status, r.Header.Get("Location"))
	}
	for path, want := range map[string]string{"/login": "/", "/signup": "/", "/login?next=/orders": "/orders", "/signup?next=//evil.example": "/"} {
		if r := s.get(path); r.Status != http.StatusSeeOther || r.Header.Get("Location") != want {
			t.Fatalf("signed in, GET %s: %d %q, want 303 to %s", path, r.Status, r.Header.Get("Location"), want)
		}
	}
}

var noticeRe = regexp.MustCompile(`(?s)<div id="notice" class="notice notice-\w+" role="(alert|status)">\s*<p>(.*?)</p>\s*</div>`)

// hasNotice checks the message a page opens with: its role and its text,
// tags removed. An empty role wants no message at all.
func hasNotice(t *testing.T, page response, role, says string) {
	t.Helper()
	m := noticeRe.FindSubmatch(page.Body)
	if role == "" {
		if m != nil {
			t.Fatalf("the page opens with a message it should not have: %s", m[0])
		}
		return
	}
	if m == nil {
		t.Fatalf("the page opens with no message (want %s %q): %s", role, says, page.Body)
	}
	text := html.UnescapeString(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(string(m[2]), ""))
	if string(m[1]) != role || !strings.Contains(text, says) {
		t.Fatalf("the page opens with %s %q, want %s saying %q", m[1], text, role, says)
	}
}

var hiddenField = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// retryFields is what the error page's retry button sends.
func retryFields(t *testing.T, page response) url.Values {
	t.Helper()
	i := strings.Index(string(page.Body), `<form method="post" action="`)
	if i < 0 {
		t.Fatalf("no retry button on the page: %s", page.Body)
	}
	out := url.Values{}
	for _, m := range hiddenField.FindAllSubmatch(page.Body[i:], -1) {
		out.Add(html.UnescapeString(string(m[1])), html.UnescapeString(string(m[2])))
	}
	return out
}

func TestPagesAndAssets(t *testing.T) {
	e := newEnv(t)
	s := e.shopper()
	isPage(t, s.get("/"), http.StatusOK, "Catalog", "Log in", `name="viewport"`)
	isPage(t, s.get("/no/such/page"), http.StatusNotFound, "There is no such page")
	isPage(t, s.get("/how-it-works"), http.StatusOK, "one order and one charge", `<nav aria-label="Main">`)
	isPage(t, s.get("/problems"), http.StatusOK, "Idempotency policy", `<nav aria-label="Main">`)
	// An unknown problem type is a page for a browser, problem+json for an API client.
	r, err := s.send(http.MethodGet, "/problems/nope", nil, http.Header{"Accept": {"text/html,application/xhtml+xml"}})
	if err != nil {
		t.Fatal(err)
	}
	isPage(t, r, http.StatusNotFound, "There is no such page", `<nav aria-label="Main">`)
	for _, asset := range []string{"/static/simple.min.css", "/static/app.css", "/static/app.js", "/static/favicon.svg"} {
		if r := s.get(asset); r.Status != http.StatusOK || len(r.Body) == 0 {
			t.Fatalf("%s: %d", asset, r.Status)
		}
	}
	// The API keeps answering problem+json.
	isProblem(t, s.get("/api/v1/no-such"), http.StatusNotFound, "/problems/not-found")
}

// In production TLS usually ends at a proxy, so the request here is plain
// HTTP; the cookie is marked Secure all the same.
func TestSessionCookieIsSecureInProduction(t *testing.T) {
	e := newEnv(t, func(d *setup) { d.SecureCookies = true })
	r := e.shopper().post("/signup", url.Values{"email": {"ann@example.com"}, "password": {webPassword}})
	if cookie := sessionCookieOf(t, r); !cookie.Secure {
		t.Fatalf("session cookie %+v: want Secure when configured so", cookie)
	}
}
