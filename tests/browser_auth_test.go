package tests

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shop/shop/payments"
)

// With JavaScript off, Pay with the card that asks to authenticate is
// double-clicked, sent again from the back button (its stored 303 leads to
// the same authentication), and Complete authentication is double-clicked:
// both pairs of submissions reach the server, the first of each held back
// until the second leaves the browser, and the shopper lands on the order
// page, paid, with one charge in the provider's ledger.
func TestBrowserAuthenticationDoubleClickedChargesOnce(t *testing.T) {
	ctx := newBrowser(t, withoutScripts)
	e := newEnv(t, withLatency(50*time.Millisecond))
	held := func(path string) bool {
		return strings.HasSuffix(path, "/payments") || strings.HasPrefix(path, payments.AuthPath)
	}
	counter := &postCounter{next: newServer(t, e.deps), held: held, posts: map[string]int{}, second: make(chan struct{})}
	srv := httptest.NewServer(counter)
	t.Cleanup(srv.Close)

	must(t, chromedp.Do(ctx,
		signUp(srv.URL, "auth@example.com"),
		scripts(false),
		chromedp.Reload(),
		chromedp.WaitVisible("form.catalog"),
		chromedp.SetValue("#qty-"+e.products()[0], "1"),
		chromedp.Click("form.catalog button"),
		chromedp.WaitVisible(`form[action$="/payments"]`),
		chromedp.Click(`input[value="`+payments.MethodAuthentication+`"]`),
		doubleClick(`form[action$="/payments"] button`, counter),
		chromedp.WaitVisible(`button[value="complete"]`),
	))
	if e.charges() != 0 || e.count("simulated_charges", "status = ?", "requires_action") != 1 {
		t.Fatal("on the authentication page: want nothing charged, one authentication waiting")
	}
	authPage, err := chromedp.Run(ctx, chromedp.Location())
	must(t, err)

	// The back button, and Pay again on the page as it was: the same
	// authentication, not a second one.
	must(t, chromedp.Do(ctx,
		chromedp.NavigateBack(),
		chromedp.WaitVisible(`form[action$="/payments"]`),
		chromedp.Click(`input[value="`+payments.MethodAuthentication+`"]`),
		chromedp.Click(`form[action$="/payments"] button`),
		chromedp.WaitVisible(`button[value="complete"]`),
	))
	again, err := chromedp.Run(ctx, chromedp.Location())
	must(t, err)
	if again != authPage || e.count("simulated_charges") != 1 {
		t.Fatalf("Pay again from the back button led to %s (first %s), %d requests at the provider; want the same page, 1", again, authPage, e.count("simulated_charges"))
	}
	counter.mu.Lock()
	counter.second, counter.first = make(chan struct{}), nil
	counter.mu.Unlock()
	must(t, chromedp.Do(ctx,
		doubleClick(`button[value="complete"]`, counter),
		chromedp.WaitVisible(`main .status-paid`),
	))
	text, err := chromedp.Run(ctx, chromedp.Text(`main [role="status"]`))
	must(t, err)
	if !strings.Contains(text, "Paid.") {
		t.Fatalf("back from the authentication the order page shows: %s", text)
	}
	pays, auths := 0, 0
	counter.mu.Lock()
	for path, n := range counter.posts {
		switch {
		case strings.HasSuffix(path, "/payments"):
			pays += n
		case strings.HasPrefix(path, payments.AuthPath):
			auths += n
		}
	}
	counter.mu.Unlock()
	if pays != 3 || auths != 2 {
		t.Fatalf("the server received %d payments and %d authentications, want the double-click's 2 and the back button's 1, and the double-click's 2", pays, auths)
	}
	if got := e.sideEffects(); got.orders != 1 || got.payments != 1 || e.charges() != 1 {
		t.Fatalf("side effects %+v, charges %d: want one order, one payment, one charge", got, e.charges())
	}
}
