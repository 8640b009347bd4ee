package tests

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/shop/shop/models"
	"github.com/shop/shop/notify"
	"github.com/shop/shop/payments"
)

// A shopper and a staff member are told what happened: the shopper's
// Activity names and links the order of every line about one, a declined
// request shows staff's reason with "Ask again" folded away under it, and
// the console's Send again redelivers a webhook once, saying so.

// signIn signs the browser in as email, on the shop at base.
func signIn(t *testing.T, ctx context.Context, base, email string) {
	t.Helper()
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/login"),
		chromedp.SendKeys("#email", email),
		chromedp.SendKeys("#password", webPassword),
		chromedp.Click("main form button"),
		chromedp.WaitVisible("form.catalog"),
	))
}

// unfold opens the closed details element sel from the keyboard (focus on
// its summary, Enter). A starved Chromium may drop the key press, as it
// may a click (pressUntil): it is pressed again, as a hand would, only when
// the element is still closed 3 s later, at most 3 times; each press is
// bounded, so a browser that hangs fails here, saying what the page held,
// not at the test's deadline.
func unfold(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	isOpen := chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector(%q).open`, sel))
	opened := func() bool { // read, each time, within a bound of its own
		readCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		open, err := chromedp.Run(readCtx, isOpen)
		return err == nil && open
	}
	for press := 1; press <= 3; press++ {
		pressCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := chromedp.Do(pressCtx, chromedp.Focus(sel+" > summary"), chromedp.KeyEvent(kb.Enter))
		cancel()
		// A press that errored may still land: read open before pressing again, or it toggles twice.
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if opened() {
				return
			}
		}
		logCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		focused, _ := chromedp.Run(logCtx, chromedp.Evaluate[string](`document.activeElement.outerHTML.slice(0, 80)`))
		cancel()
		t.Logf("press %d of Enter on %s > summary left it closed (%v); focused: %s", press, sel, err, focused)
	}
	t.Fatalf("%s did not open after 3 presses of Enter on its summary", sel)
}

// activityLine is one line of the Activity page: its words and the
// pages it links to.
type activityLine struct {
	Text  string   `json:"text"`
	Links []string `json:"links"`
}

func TestBrowserActivityLinksEveryLineToItsOrder(t *testing.T) {
	axe, err := os.ReadFile(devTool(t, "axe-core/axe.min.js"))
	must(t, err)
	ctx := newBrowser(t)
	e, ids, s := signedIn(t)
	paid := paidOrder(t, s, ids[0], payments.MethodVisa)
	s.post(paid+"/refund-requests", url.Values{"idempotency_key": {keyOfForm(t, s.get(paid), paid+"/refund-requests")}, "reason": {"Arrived broken"}})
	unpaid := s.placeOrder(s.checkout(ids[0], 1))
	s.post(unpaid+"/payments", s.payForm(unpaid, payments.MethodDeclined))
	s.post(unpaid+"/payments", s.payForm(unpaid, payments.MethodUnavailable)) // nothing saved but its key's row
	cancelled := s.placeOrder(s.checkout(ids[0], 1))
	s.post(cancelled+"/cancel", url.Values{"idempotency_key": {keyOfForm(t, s.get(cancelled), cancelled+"/cancel")}})
	staff := e.staffBrowser("staff@example.com")
	var req models.RefundRequest
	must(t, e.db.Take(&req).Error)
	console, decline := "/staff"+paid, "/staff"+paid+"/refund-requests/"+req.ID+"/decline"
	if r := staff.post(decline, staffForm(t, staff, console, decline, "reason", "Used for a month")); r.Status != http.StatusSeeOther {
		t.Fatalf("decline: %d %s", r.Status, r.Body)
	}

	// Every line is about an order, and names it as the shopper knows it
	// and links to its page: three on the paid one (placed, paid, asked for
	// a refund), three on the unpaid one (placed, declined, not gone
	// through), two on the cancelled one.
	signIn(t, ctx, e.url, "ann@example.com")
	must(t, chromedp.Do(ctx, chromedp.Navigate(e.url+"/account"), chromedp.WaitVisible("ul.activity")))
	lines, err := chromedp.Run(ctx, chromedp.Evaluate[[]activityLine](`[...document.querySelectorAll("ul.activity > li")].map(li =>
	  ({text: li.innerText, links: [...li.querySelectorAll("a")].map(a => a.getAttribute("href"))}))`))
	must(t, err)
	want := map[string]int{paid: 3, unpaid: 3, cancelled: 2}
	linked := map[string]int{}
	for _, line := range lines {
		if len(line.Links) != 1 {
			t.Errorf("the Activity line %q links to %v, want its order", line.Text, line.Links)
			continue
		}
		var order models.Order
		must(t, e.db.Take(&order, "id = ?", strings.TrimPrefix(line.Links[0], "/orders/")).Error)
		if !strings.Contains(line.Text, fmt.Sprintf("order #%d", order.Number)) {
			t.Errorf("the Activity line %q links to order #%d without naming it", line.Text, order.Number)
		}
		linked[line.Links[0]]++
	}
	for path, n := range want {
		if linked[path] != n {
			t.Errorf("%d Activity lines link to %s, want %d: %+v", linked[path], path, n, lines)
		}
	}
	a := &auditor{t: t, ctx: ctx, axe: string(axe), shots: os.Getenv("SHOP_SCREENSHOTS")}
	a.audit("account-activity-linked", false)

	// The link leads to the order; its declined request opens the page with
	// staff's reason, and asking again is folded away under it.
	submit(t, ctx, 200, chromedp.Click(`ul.activity a[href="`+paid+`"]`))
	if location, err := chromedp.Run(ctx, chromedp.Location()); err != nil || location != e.url+paid {
		t.Fatalf("the Activity link leads to %s (%v), want %s", location, err, paid)
	}
	a.says("order-request-declined", "status", "Your request for a refund was declined.")
	a.says("order-request-declined", "status", "The shop's staff said: Used for a month")
	folded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
	  const form = document.querySelector('form[action$="/refund-requests"]');
	  return form.closest("details:not([open])") !== null && !form.checkVisibility() &&
	    document.querySelector("details.ask-again").textContent.includes("Used for a month");
	})()`))
	must(t, err)
	if !folded {
		t.Fatal("after a decline, the order page offers the refund request form at once, or not under staff's reason")
	}
	a.audit("order-request-declined", false)
	e.clock.Advance(time.Minute) // the new request is the latest
	// Opened from the keyboard: a click lands by coordinates, which a page
	// still settling after the audit's viewport changes can move.
	unfold(t, ctx, "details.ask-again")
	visible, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	must(t, chromedp.Do(visible, chromedp.WaitVisible("#request-reason")))
	// Sent from the keyboard too: a click on the button timed out once the
	// same way (CI, no request reached the server in 4 minutes).
	submit(t, ctx, 200, chromedp.SendKeys("#request-reason", "Still broken"),
		chromedp.Focus(`form[action$="/refund-requests"] button`), chromedp.KeyEvent(kb.Enter))
	a.says("order-asked-again", "status", "Your request for a refund was received.")
	if n := e.count("refund_requests", "state = ?", models.RequestOpen); n != 1 {
		t.Fatalf("%d open requests after asking again, want 1", n)
	}
}

// Staff press Send again on a webhook delivery, JavaScript off, a
// double-click whose both submissions reach the server, then the same form
// again from the back button: the endpoint gets the same webhook-id and
// body once more, once; the page names what was sent again, and says so
// when the form was sent twice. A shopper's press is
// refused and sends nothing.
func TestBrowserConsoleRedeliversAWebhookOnce(t *testing.T) {
	axe, err := os.ReadFile(devTool(t, "axe-core/axe.min.js"))
	must(t, err)
	ctx := newBrowser(t)
	e := newEnv(t, withLatency(150*time.Millisecond))
	e.shopperOrder("redeliver@example.com")
	events := e.factEvents()
	e.handleAll(notify.Webhooks{}, events, 1)
	recv, endpoint := newReceiver(t)
	sender := e.sender(endpoint.URL, 8)
	e.rounds(sender, 5)
	id := events[0].ID
	path := "/staff/webhooks/" + id + "/redeliver"
	redeliveries := func(p string) bool { return strings.HasSuffix(p, "/redeliver") }
	counter := &postCounter{next: newServer(t, e.deps), held: redeliveries, posts: map[string]int{}, second: make(chan struct{})}
	srv := httptest.NewServer(counter)
	t.Cleanup(srv.Close)

	shopper := e.shopper()
	shopper.signUp("shopper@example.com")
	if r := shopper.post(path, url.Values{"idempotency_key": {"shopper-redeliver"}}); r.Status != http.StatusForbidden {
		t.Fatalf("a shopper's Send again: %d, want 403", r.Status)
	}
	if n := e.rounds(sender, 5); n != 0 {
		t.Fatalf("%d attempts after a shopper's Send again, want none", n)
	}

	must(t, chromedp.Do(ctx,
		scripts(false),
		signUp(srv.URL, "staff@example.com"),
	))
	e.makeStaff("staff@example.com")
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/staff/webhooks"),
		doubleClick(`form[action="`+path+`"] button`, counter),
		chromedp.WaitVisible(`main [role="status"]`),
	))
	location, err := chromedp.Run(ctx, chromedp.Location())
	must(t, err)
	if location != srv.URL+"/staff/webhooks/"+id {
		t.Fatalf("after Send again the browser is at %s, want the page of the delivery sent again", location)
	}
	if n := counter.count(path); n != 2 {
		t.Fatalf("the server received %d Send again, want the double-click's 2", n)
	}
	a := &auditor{t: t, ctx: ctx, axe: string(axe), shots: os.Getenv("SHOP_SCREENSHOTS")}
	a.says("staff-webhook-redelivered", "status", "The "+events[0].Type+" message is being sent again.")
	must(t, chromedp.Do(ctx, scripts(true))) // axe runs in the page
	a.audit("staff-webhook-redelivered", false)
	// The same form sent again (its key, as the back button would show it):
	// it was sent again once, and the page says so.
	var sent struct{ Key string }
	must(t, e.db.Table("idempotency_keys").Select("key").Where("route LIKE ?", "%/redeliver").Take(&sent).Error)
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/staff/webhooks"),
		chromedp.SetValue(`form[action="`+path+`"] input[name="idempotency_key"]`, sent.Key),
		chromedp.Click(`form[action="`+path+`"] button`),
		chromedp.WaitVisible(`main [role="status"]`),
	))
	a.says("staff-webhook-sent-twice", "status", "Sent twice, done once")
	a.says("staff-webhook-sent-twice", "status", "The "+events[0].Type+" message is being sent again.")

	if n, sent := e.rounds(sender, 5), counter.count(path); n != 1 || sent != 3 {
		t.Fatalf("%d attempts after %d Send again of one form, want 1 after 3", n, sent)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if recv.sent[id] != 2 || recv.accepted[id] != 2 || recv.bodies[id][0] != recv.bodies[id][1] || recv.bad != 0 {
		t.Fatalf("%s sent %d times, accepted %d, bodies %q; want twice the same", id, recv.sent[id], recv.accepted[id], recv.bodies[id])
	}
	if n := e.count("webhook_attempts", "delivery_id = ?", id); n != 2 {
		t.Fatalf("%d attempts recorded for the delivery sent again, want 2", n)
	}
}
