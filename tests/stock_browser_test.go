package tests

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The checkout of the last units in a real browser, JavaScript off: a
// double-click and a back-button resubmit of the form reserve once; an
// order of more than is left brings the form back with the quantity kept,
// the line marked and a fresh key, and once corrected it is placed; then
// the catalog says the product is sold out and takes no quantity for it.
func TestBrowserCheckoutReservesOnce(t *testing.T) {
	ctx := newBrowser(t, withoutScripts)
	e := newEnv(t, withLatency(150*time.Millisecond))
	tote := stockOf(t, e.db, "TOTE-CNV", 3)
	checkout := func(path string) bool { return path == "/orders" }
	counter := &postCounter{next: newServer(t, e.deps), held: checkout, posts: map[string]int{}, second: make(chan struct{})}
	srv := httptest.NewServer(counter)
	t.Cleanup(srv.Close)
	qty := "#qty-" + tote
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		must(t, err)
		return s
	}
	must(t, chromedp.Do(ctx,
		scripts(false),
		signUp(srv.URL, "last-units@example.com"),
	))
	if got := text("form.catalog"); !strings.Contains(got, "Only 3 left") || !strings.Contains(got, "Sold out") || !strings.Contains(got, "In stock") {
		t.Fatalf("the catalog does not tell the stock: %s", got)
	}

	must(t, chromedp.Do(ctx,
		chromedp.SetValue(qty, "2"),
		doubleClick("form.catalog button", counter),
		chromedp.WaitVisible("main .status"),
	))
	orderURL, err := chromedp.Run(ctx, chromedp.Location())
	must(t, err)
	if n := counter.count("/orders"); n != 2 || e.count("orders") != 1 || unitsLeft(t, e.db, tote) != 1 {
		t.Fatalf("a double-click: %d checkouts, %d orders, %d left; want 2, 1 and 1", n, e.count("orders"), unitsLeft(t, e.db, tote))
	}
	must(t, chromedp.Do(ctx,
		chromedp.NavigateBack(),
		chromedp.WaitVisible("form.catalog"),
		chromedp.SetValue(qty, "2"),
		chromedp.Click("form.catalog button"),
		chromedp.WaitVisible("main .status"),
	))
	again, err := chromedp.Run(ctx, chromedp.Location())
	must(t, err)
	if again != orderURL || e.count("orders") != 1 || unitsLeft(t, e.db, tote) != 1 {
		t.Fatalf("the back button's resubmit: at %s (want %s), %d orders, %d left; want 1 and 1", again, orderURL, e.count("orders"), unitsLeft(t, e.db, tote))
	}

	must(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible("form.catalog"),
		chromedp.SetValue(qty, "2"),
	))
	sent, err := chromedp.Run(ctx, chromedp.Value(`input[name="idempotency_key"]`))
	must(t, err)
	must(t, chromedp.Do(ctx, chromedp.Click("form.catalog button"), chromedp.WaitVisible(`main [role="alert"]`)))
	kept, err := chromedp.Run(ctx, chromedp.Value(qty))
	must(t, err)
	fresh, err := chromedp.Run(ctx, chromedp.Value(`input[name="idempotency_key"]`))
	must(t, err)
	if kept != "2" || fresh == sent || !strings.Contains(text("#err-"+tote), "Only 1 left") || !strings.Contains(text(`main [role="alert"]`), "not enough left") {
		t.Fatalf("the form came back with %q typed, key %q (sent %q), marked %q, told %q", kept, fresh, sent, text("#err-"+tote), text(`main [role="alert"]`))
	}
	if e.count("orders") != 1 || e.count("idempotency_keys") != 1 || unitsLeft(t, e.db, tote) != 1 {
		t.Fatalf("an order of more than is left wrote: %d orders, %d keys, %d left", e.count("orders"), e.count("idempotency_keys"), unitsLeft(t, e.db, tote))
	}

	must(t, chromedp.Do(ctx,
		chromedp.SetValue(qty, "1"),
		chromedp.Click("form.catalog button"),
		chromedp.WaitVisible("main .status"),
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible("form.catalog"),
	))
	disabled, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("`+qty+`").disabled`))
	must(t, err)
	if e.count("orders") != 2 || unitsLeft(t, e.db, tote) != 0 || !disabled {
		t.Fatalf("after the corrected order: %d orders, %d left, the field disabled %v; want 2, 0 and disabled", e.count("orders"), unitsLeft(t, e.db, tote), disabled)
	}
}
