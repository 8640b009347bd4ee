package tests

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// A staff member double-clicks the console's Refund in a real browser,
// JavaScript off, both clicks reaching the server: one refund, in the
// provider's ledger too; the shopper's open request is fulfilled, and the
// shopper's order page shows the refund.
func TestBrowserConsoleDoubleClickedRefundRefundsOnce(t *testing.T) {
	// Tall enough that the Refund button needs no scrolling, as on the
	// other double-click tests (a scrolled page is one thing fewer to vary).
	ctx := newBrowser(t, withoutScripts, chromedp.WindowSize(1100, 1400))
	e, ids, s := signedIn(t, withLatency(150*time.Millisecond))
	orderPath := paidOrder(t, s, ids[0], payments.MethodVisa)
	s.post(orderPath+"/refund-requests", url.Values{"idempotency_key": {keyOfForm(t, s.get(orderPath), orderPath+"/refund-requests")}, "reason": {"Arrived broken"}})
	refunds := func(path string) bool { return strings.HasSuffix(path, "/refunds") }
	counter := &postCounter{next: newServer(t, e.deps), held: refunds, posts: map[string]int{}, second: make(chan struct{})}
	srv := httptest.NewServer(counter)
	t.Cleanup(srv.Close)
	console := "/staff/orders/" + strings.TrimPrefix(orderPath, "/orders/")

	must(t, chromedp.Do(ctx,
		signUp(srv.URL, "staff@example.com"),
	))
	e.makeStaff("staff@example.com")
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+console),
		chromedp.WaitVisible("#refund-reason"),
		chromedp.SendKeys("#refund-amount", "2.50"),
		chromedp.SendKeys("#refund-reason", "Arrived broken"),
		doubleClick(`form[action$="/refunds"] button`, counter),
		chromedp.WaitVisible("main .status"),
	))
	location, err := chromedp.Run(ctx, chromedp.Location())
	must(t, err)
	if location != srv.URL+console {
		t.Fatalf("after Refund the browser is at %s, want the console's order page", location)
	}
	if n, refunded := counter.count(console+"/refunds"), e.count("refunds"); n != 2 || refunded != 1 {
		t.Fatalf("the server received %d refunds and made %d, want the double-click's 2 and 1", n, refunded)
	}
	if n, sum := e.refunded(); n != 1 || sum != 250 {
		t.Fatalf("the provider refunded %d times, %d cents; want once, 250", n, sum)
	}
	history, err := chromedp.Run(ctx, chromedp.Text("main"))
	must(t, err)
	if !strings.Contains(history, "$2.50 by staff@example.com: succeeded. Reason: Arrived broken") || !strings.Contains(history, "(Arrived broken): refunded.") ||
		!strings.Contains(history, "Refunded $2.50 on order #1001.") {
		t.Fatalf("the console's order page: %s", history)
	}
	if n := e.count("refund_requests", "state = ?", models.RequestFulfilled); n != 1 {
		t.Fatalf("%d requests fulfilled, want 1", n)
	}
	isPage(t, s.get(orderPath), http.StatusOK, "Refunded $2.50 to your Test Visa card.", "You asked for a refund (Arrived broken): refunded.")
}
