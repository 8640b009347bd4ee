package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/shop/shop/models"
	"github.com/shop/shop/notify"
	"github.com/shop/shop/payments"
)

// Every page, in every state a shopper can meet, is audited in Chromium:
// axe-core's accessibility rules in both colour schemes, no sideways scroll
// on a 320 px screen, and no developer's word in what the shopper reads.
// And every page's HTML is checked by the Nu HTML Checker (vnu).

// devTool is a file that `npm ci` installs under node_modules/ at the
// repository root (the versions are pinned in package.json). Outside CI a
// machine without it skips the test, saying how to get it; with CI=true it
// fails.
func devTool(t *testing.T, rel string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "node_modules", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("node_modules/%s is missing (npm ci --no-audit --no-fund at the repository root): failing, CI=true", rel)
	}
	t.Skipf("node_modules/%s is missing: run `npm ci --no-audit --no-fund` at the repository root; CI does, and runs this test", rel)
	return ""
}

// developerWords are what a shopper must never read: keys (UUIDs), HTTP
// status codes, routes, RFCs, Go durations, the words of the protocol.
// Amounts of money are left out before the check.
var developerWords = regexp.MustCompile(`(?i)[0-9a-f]{8}-[0-9a-f]{4}-|\b[2-5][0-9]{2}\b|\b(?:GET|POST) /|/:id|\bRFC\b|\b\d+h\d+m\d+s\b|\b\d+(?:ms|s)\b|idempotenc|Retry-After|\bHTTP\b|problem\+json`)

var amounts = regexp.MustCompile(`\$[0-9,]+\.[0-9]{2}`)

// reference is the error page's small print: the request's id, for the
// shopper to quote to support, which is meant to look like an id.
var reference = regexp.MustCompile(`Reference: [!-~]+`)

// auditor audits the page the browser shows.
type auditor struct {
	t     *testing.T
	ctx   context.Context
	axe   string
	shots string // where screenshots go; none when empty
	pages int
}

type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

const runAxe = `axe.run(document, {
  runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]},
  resultTypes: ["violations"]
}).then(r => r.violations
  .filter(v => v.impact === "serious" || v.impact === "critical")
  .map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map(n => n.target.join(" ") + ": " + (n.failureSummary || ""))})))`

// audit checks the page in light and dark mode at 1280 × 900, its width on
// a 320 px phone, and, unless it is the API's documentation, for developer
// words; and takes the shopper's pages' pictures, desktop and phone (390 ×
// 844), when asked to.
func (a *auditor) audit(name string, forDevelopers bool) {
	t := a.t
	t.Helper()
	a.pages++
	cspViolations(t, a.ctx, name)
	must(t, chromedp.Do(a.ctx, chromedp.Evaluate[chromedp.Void](a.axe)))
	if !forDevelopers {
		text, err := chromedp.Run(a.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		must(t, err)
		if w := developerWords.FindString(reference.ReplaceAllString(amounts.ReplaceAllString(text, ""), "")); w != "" {
			t.Errorf("%s: the shopper reads %q: %s", name, w, text)
		}
	}
	for _, scheme := range []string{"light", "dark"} {
		must(t, chromedp.Do(a.ctx, colorScheme(scheme), chromedp.EmulateViewport(1280, 900)))
		violations, err := chromedp.Run(a.ctx, chromedp.Evaluate[[]axeViolation](runAxe, chromedp.EvalAwaitPromise))
		must(t, err)
		for _, v := range violations {
			t.Errorf("%s, %s mode: axe %s (%s): %s\n  %s", name, scheme, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n  "))
		}
		if !forDevelopers {
			a.screenshot(name + "-desktop-" + scheme)
		}
		if scheme == "light" {
			must(t, chromedp.Do(a.ctx, chromedp.EmulateViewport(320, 640, chromedp.EmulateMobile)))
			width, err := chromedp.Run(a.ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
			must(t, err)
			if width > 320 {
				t.Errorf("%s: %d px wide on a 320 px screen: it scrolls sideways", name, width)
			}
		}
		if !forDevelopers && a.shots != "" {
			must(t, chromedp.Do(a.ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)))
			a.screenshot(name + "-phone-" + scheme)
		}
	}
	must(t, chromedp.Do(a.ctx, chromedp.EmulateViewport(1280, 900)))
}

// says checks the message the page opens with: its role and its text.
func (a *auditor) says(name, role, text string) {
	a.t.Helper()
	got, err := chromedp.Run(a.ctx, chromedp.Evaluate[string](
		fmt.Sprintf(`(document.querySelector('main > [role=%q]') || {innerText: ""}).innerText`, role)))
	must(a.t, err)
	if !strings.Contains(got, text) {
		page, _ := chromedp.Run(a.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		a.t.Fatalf("%s: the %s message says %q, want %q; the page: %s", name, role, got, text, page)
	}
}

func (a *auditor) screenshot(name string) {
	a.t.Helper()
	if a.shots == "" {
		return
	}
	png, err := chromedp.Run(a.ctx, chromedp.CaptureScreenshot())
	must(a.t, err)
	must(a.t, os.WriteFile(filepath.Join(a.shots, name+".png"), png, 0o644))
}

func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return err
	})
}

// submit clicks a form's button and waits for the page it leads to; the
// answer must have the status given.
func submit(t *testing.T, ctx context.Context, status int64, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	resp, err := chromedp.RunResponse(ctx, steps...)
	must(t, err)
	if resp.Status != status {
		t.Fatalf("%s answered %d, want %d", resp.URL, resp.Status, status)
	}
}

func TestBrowserAuditsEveryPageAndOutcome(t *testing.T) {
	axe, err := os.ReadFile(devTool(t, "axe-core/axe.min.js"))
	must(t, err)
	ctx := newBrowser(t)
	lost := &failing{err: errors.New("read: connection reset by peer"), afterCharge: true}
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider { lost.Provider = p; return lost }))
	ids := e.products()
	srv := e.url
	a := &auditor{t: t, ctx: ctx, axe: string(axe), shots: os.Getenv("SHOP_SCREENSHOTS")}
	visit := func(name, path string, status int64, forDevelopers bool) {
		t.Helper()
		resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(srv+path))
		must(t, err)
		if resp.Status != status {
			t.Fatalf("%s: %d, want %d", path, resp.Status, status)
		}
		a.audit(name, forDevelopers)
	}

	// Signed out.
	visit("catalog-signed-out", "/", 200, false)
	// The first Tab reaches the skip link: on screen, with a focus ring.
	must(t, chromedp.Do(ctx, chromedp.KeyEvent(kb.Tab)))
	skip, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
	  const a = document.activeElement, box = a.getBoundingClientRect(), style = getComputedStyle(a);
	  return a.matches("a.skip[href='#main']") && box.top >= 0 && style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2;
	})()`))
	must(t, err)
	if !skip {
		t.Fatal("the first Tab does not show a focused skip link")
	}
	visit("how-it-works", "/how-it-works", 200, false)
	visit("not-found", "/no/such/page", 404, false)
	visit("problems", "/problems", 200, true)
	visit("problem-type", "/problems/idempotency-key-reused", 200, true)
	visit("problem-type-unknown", "/problems/nope", 404, false)
	visit("login", "/login?next=/orders", 200, false)
	submit(t, ctx, 200, chromedp.Click(`main a[href^="/signup"]`))
	a.audit("signup", false)
	submit(t, ctx, 422, chromedp.SendKeys("#email", "not an email"), chromedp.Click("main form button"))
	a.says("signup-invalid", "alert", "Please correct the fields below.")
	a.audit("signup-invalid", false)

	// Sign up: next, kept from the log-in page, leads to My orders.
	must(t, chromedp.Do(ctx, chromedp.SetValue("#email", "ann@example.com"), chromedp.SendKeys("#password", webPassword)))
	submit(t, ctx, 200, chromedp.Click("main form button"))
	location, err := chromedp.Run(ctx, chromedp.Location())
	must(t, err)
	if location != srv+"/orders" {
		t.Fatalf("after sign-up from /login?next=/orders the browser is at %s", location)
	}
	a.audit("orders-empty", false)

	// The catalog, its running total, and a quantity out of range.
	visit("catalog", "/", 200, false)
	must(t, chromedp.Do(ctx, chromedp.SetValue("#qty-"+ids[0], "101")))
	submit(t, ctx, 422, chromedp.Click("form.catalog button"))
	a.says("catalog-invalid", "alert", "Some quantities are not valid; nothing was ordered.")
	a.audit("catalog-invalid", false)
	must(t, chromedp.Do(ctx, chromedp.SetValue("#qty-"+ids[0], ""), chromedp.SendKeys("#qty-"+ids[0], "2")))
	total, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("form.catalog .total output").textContent`))
	must(t, err)
	var product models.Product
	must(t, e.db.First(&product, "id = ?", ids[0]).Error)
	if want := fmt.Sprintf("%d.%02d", 2*product.PriceCents/100, 2*product.PriceCents%100); !strings.Contains(total, want) {
		t.Fatalf("the running total says %q, want 2 × %d cents", total, product.PriceCents)
	}
	submit(t, ctx, 200, chromedp.Click("form.catalog button"))
	orderURL, err := chromedp.Run(ctx, chromedp.Location())
	must(t, err)
	a.audit("order", false)
	// Cancel order is a secondary action: it does not look like Pay, and
	// sits apart below it.
	apart, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const pay = document.querySelector('form[action$="/payments"] button'), cancel = document.querySelector('form[action$="/cancel"] button');
		return getComputedStyle(pay).backgroundColor !== getComputedStyle(cancel).backgroundColor && cancel.getBoundingClientRect().top - pay.getBoundingClientRect().bottom >= 32;
	})()`))
	must(t, err)
	if !apart {
		t.Fatal("the order page's Cancel order looks like Pay, or sits right under it")
	}

	// Pay without choosing a card: the form again, nothing charged.
	submit(t, ctx, 422, chromedp.Click(`form[action$="/payments"] button`))
	a.says("order-no-card", "alert", "Nothing was charged: choose a card to pay with")
	a.audit("order-no-card", false)

	// Declined.
	submit(t, ctx, 200, chromedp.Click(`input[value="`+payments.MethodChargeDeclined+`"]`), chromedp.Click(`form[action$="/payments"] button`))
	a.says("order-declined", "alert", "Your card was declined. Nothing was charged: choose another card and pay again.")
	a.audit("order-declined", false)

	// The provider is down: try again sends the same form, and a link leads back.
	submit(t, ctx, 502, chromedp.Click(`input[value="`+payments.MethodUnavailable+`"]`), chromedp.Click(`form[action$="/payments"] button`))
	a.says("provider-down", "alert", "Nothing was charged, try again")
	a.audit("provider-down", false)
	submit(t, ctx, 502, chromedp.Click("form.retry button"))
	a.says("provider-down", "alert", "Nothing was charged, try again")
	submit(t, ctx, 200, chromedp.Click(`main a[href="`+strings.TrimPrefix(orderURL, srv)+`"]`))

	// The provider's answer is lost: the payment is being confirmed.
	lost.mu.Lock()
	lost.n = 1
	lost.mu.Unlock()
	submit(t, ctx, 502, chromedp.Click(`input[value="`+payments.MethodVisa+`"]`), chromedp.Click(`form[action$="/payments"] button`))
	a.says("payment-unconfirmed", "alert", "You will not be charged twice")
	a.audit("payment-unconfirmed", false)
	submit(t, ctx, 200, chromedp.Click(`main a[href="`+strings.TrimPrefix(orderURL, srv)+`"]`))
	a.says("order-confirming", "status", "Your last payment is being confirmed.")
	a.audit("order-confirming", false)

	// Paid: paying again first asks the provider about the payment being
	// confirmed, which went through — once; the page says the card chosen
	// this time was not charged.
	submit(t, ctx, 200, chromedp.Click(`input[value="`+payments.MethodVisa+`"]`), chromedp.Click(`form[action$="/payments"] button`))
	a.says("order-paid", "status", "Already paid. An earlier payment of this order went through")
	a.audit("order-paid", false)
	visit("receipt", strings.TrimPrefix(orderURL, srv)+"/receipt", 200, false)

	// A form sent twice: back to the catalog as it was, and send it again.
	must(t, chromedp.Do(ctx, chromedp.Navigate(srv+"/"), chromedp.SetValue("#qty-"+ids[1], "1")))
	submit(t, ctx, 200, chromedp.Click("form.catalog button"))
	must(t, chromedp.Do(ctx, chromedp.NavigateBack(), chromedp.WaitVisible("form.catalog"), chromedp.SetValue("#qty-"+ids[1], "1")))
	submit(t, ctx, 200, chromedp.Click("form.catalog button"))
	a.says("order-sent-twice", "status", "You sent the order form more than once; one order was placed.")
	a.audit("order-sent-twice", false)

	// A form changed after sending.
	must(t, chromedp.Do(ctx, chromedp.NavigateBack(), chromedp.WaitVisible("form.catalog"), chromedp.SetValue("#qty-"+ids[1], "3")))
	submit(t, ctx, 422, chromedp.Click("form.catalog button"))
	a.says("form-changed", "alert", "This form was already sent with different contents.")
	a.audit("form-changed", false)

	visit("orders", "/orders", 200, false)
	visit("account", "/account", 200, false)
	submit(t, ctx, 200, chromedp.Click(`main a[href="/account/password"]`))
	a.audit("password", false)
	submit(t, ctx, 422, chromedp.SendKeys("#current_password", "not my password"), chromedp.SendKeys("#new_password", "a new password"), chromedp.Click("main form button"))
	a.says("password-wrong", "alert", "Your password was not changed.")
	a.audit("password-wrong", false)
	submit(t, ctx, 200, chromedp.SendKeys("#current_password", webPassword), chromedp.SendKeys("#new_password", "a new password"), chromedp.Click("main form button"))
	a.says("password-changed", "status", "Password changed.")
	a.audit("password-changed", false)
	if got := e.sideEffects(); got.orders != 2 || got.payments != 2 || e.charges() != 1 {
		t.Fatalf("side effects %+v, charges %d: want two orders, two payments (one declined), one charge", got, e.charges())
	}

	// The shopper asks for a refund; staff give it through the API: the
	// order page tells a partial refund, then the rest; the receipt lists them.
	orderPath := strings.TrimPrefix(orderURL, srv)
	must(t, chromedp.Do(ctx, chromedp.Navigate(srv+orderPath)))
	submit(t, ctx, 200, chromedp.SendKeys("#request-reason", "Arrived broken"), chromedp.Click(`form[action$="/refund-requests"] button`))
	a.audit("order-refund-requested", false)
	a.says("order-refund-requested", "status", "Your request for a refund was received.")
	staff, _ := e.staffToken("staff@example.com")
	e.staffRefund(staff, orderPath, "part", `{"amount_cents":150}`)
	visit("order-partly-refunded", orderPath, 200, false)
	a.says("order-partly-refunded", "status", "Refunded $1.50 to your Test Visa card.")
	e.staffRefund(staff, orderPath, "rest", `{"reason":"Changed my mind"}`)
	visit("order-refunded", orderPath, 200, false)
	a.says("order-refunded", "status", "to your Test Visa card.")
	visit("receipt-refunded", orderPath+"/receipt", 200, false)

	// A cancelled order.
	must(t, chromedp.Do(ctx, chromedp.Navigate(srv+"/"), chromedp.SetValue("#qty-"+ids[0], "1")))
	submit(t, ctx, 200, chromedp.Click("form.catalog button"))
	submit(t, ctx, 200, chromedp.Click(`form[action$="/cancel"] button`))
	a.says("order-cancelled", "status", "You cancelled this order. Nothing was charged.")
	a.audit("order-cancelled", false)
	visit("account-refunds", "/account", 200, false)

	// A card that asks to authenticate: the provider's page, the order
	// waiting for it, then paid on the return.
	must(t, chromedp.Do(ctx, chromedp.Navigate(srv+"/"), chromedp.SetValue("#qty-"+ids[0], "1")))
	submit(t, ctx, 200, chromedp.Click("form.catalog button"))
	waiting, err := chromedp.Run(ctx, chromedp.Location())
	must(t, err)
	submit(t, ctx, 200, chromedp.Click(`input[value="`+payments.MethodAuthentication+`"]`), chromedp.Click(`form[action$="/payments"] button`))
	a.audit("authenticate", false)
	visit("order-authenticate", strings.TrimPrefix(waiting, srv), 200, false)
	a.says("order-authenticate", "status", "Authenticate to pay.")
	submit(t, ctx, 200, chromedp.Click(`main a[href^="`+payments.AuthPath+`"]`))
	submit(t, ctx, 200, chromedp.Click(`button[value="complete"]`))
	a.says("order-authenticated", "status", "Paid.")
	a.audit("order-authenticated", false)
	if shop, provider := e.refunds(); shop != 2 || provider != 2 || e.count("orders", "status = ?", "cancelled") != 1 {
		t.Fatalf("%d refunds, %d at the provider, %d cancelled orders: want 2, 2, 1", shop, provider, e.count("orders", "status = ?", "cancelled"))
	}

	// The staff console: none for a shopper; then, made staff by the
	// command, its pages, and a payment in doubt asked about.
	visit("staff-not-found", "/staff", 404, false)
	e.makeStaff("ann@example.com")
	visit("staff-orders", "/staff", 200, false)
	visit("staff-orders-invalid", "/staff?status=lost", 400, false)
	visit("staff-order", "/staff"+orderPath, 200, false)
	visit("staff-products", "/staff/products", 200, false)
	must(t, chromedp.Do(ctx, chromedp.Navigate(srv+"/"), chromedp.SetValue("#qty-"+ids[0], "1")))
	submit(t, ctx, 200, chromedp.Click("form.catalog button"))
	pending, err := chromedp.Run(ctx, chromedp.Location())
	must(t, err)
	visit("staff-order-pending", "/staff"+strings.TrimPrefix(pending, srv), 200, false)
	must(t, chromedp.Do(ctx, chromedp.Navigate(pending)))
	lost.mu.Lock()
	lost.n = 1
	lost.mu.Unlock()
	submit(t, ctx, 502, chromedp.Click(`input[value="`+payments.MethodVisa+`"]`), chromedp.Click(`form[action$="/payments"] button`))
	visit("staff-in-doubt", "/staff/in-doubt", 200, false)
	submit(t, ctx, 200, chromedp.Click(`form[action^="/staff/in-doubt/"] button`))
	a.audit("staff-in-doubt-settled", false)
	visit("staff-webhooks", "/staff/webhooks", 200, false)
	visit("staff-parked", "/staff/parked", 200, false)
	must(t, chromedp.Do(ctx, chromedp.Navigate(srv+"/"), chromedp.SetValue("#qty-"+ids[0], "1")))
	submit(t, ctx, 200, chromedp.Click("form.catalog button"))
	another, err := chromedp.Run(ctx, chromedp.Location())
	must(t, err)
	must(t, chromedp.Do(ctx, chromedp.Navigate(srv+"/staff"+strings.TrimPrefix(another, srv))))
	submit(t, ctx, 200, chromedp.Click(`form[action$="/cancel"] button`))
	a.audit("staff-order-cancelled", false)
	a.says("staff-order-cancelled", "status", "Cancelled order #")
	if n := e.count("payment_attempts", "state = ?", "in_doubt"); n != 0 {
		t.Fatalf("%d payment attempts still in doubt after Ask the provider now", n)
	}
	t.Logf("audited %d pages in light and dark mode", a.pages)
}

// TestPagesAreValidHTML sends every page, in every state, as the server
// wrote it, to the Nu HTML Checker in one run.
func TestPagesAreValidHTML(t *testing.T) {
	vnu := devTool(t, "vnu-jar/build/dist/vnu.jar")
	java, err := exec.LookPath("java")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("java is not installed (apt-get install default-jre-headless): failing, CI=true")
		}
		t.Skip("java is not installed (apt-get install default-jre-headless); CI installs it and runs this test")
	}
	lost := &failing{err: errors.New("read: connection reset by peer"), afterCharge: true}
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider { lost.Provider = p; return lost }))
	ids := e.products()
	s := e.shopper()
	dir := t.TempDir()
	var files []string
	page := func(name string, r response) {
		t.Helper()
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("%s: %d %s is not a page", name, r.Status, r.Header.Get("Content-Type"))
		}
		file := filepath.Join(dir, name+".html")
		must(t, os.WriteFile(file, r.Body, 0o644))
		files = append(files, file)
	}
	browserGet := func(path string) response {
		r, err := s.send(http.MethodGet, path, nil, http.Header{"Accept": {"text/html"}})
		must(t, err)
		return r
	}

	for name, path := range map[string]string{
		"catalog-signed-out": "/", "login": "/login?next=/orders", "signup": "/signup", "how-it-works": "/how-it-works",
		"problems": "/problems", "problem-type": "/problems/payment-declined", "problem-type-unknown": "/problems/nope",
		"not-found": "/no/such/page",
	} {
		page(name, browserGet(path))
	}
	page("signup-invalid", s.post("/signup", url.Values{"email": {"nope"}, "password": {"short"}}))
	page("login-wrong", s.post("/login", url.Values{"email": {"nope@example.com"}, "password": {"wrong password"}, "next": {"/orders"}}))
	s.signUp("ann@example.com")
	page("catalog", s.get("/"))
	form := s.checkout(ids[0], 101)
	page("catalog-invalid", s.post("/orders", form))
	form.Set("qty-"+ids[0], "1")
	orderPath := s.placeOrder(form)
	page("order", s.get(orderPath))
	page("order-no-card", s.post(orderPath+"/payments", url.Values{"idempotency_key": {"no-card"}}))
	s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodDeclined))
	page("order-declined", s.get(orderPath))
	page("provider-down", s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodUnavailable)))
	lost.mu.Lock()
	lost.n = 1
	lost.mu.Unlock()
	page("payment-unconfirmed", s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodVisa)))
	page("order-confirming", s.get(orderPath))
	s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodVisa))
	page("order-paid", s.get(orderPath))
	page("receipt", s.get(orderPath+"/receipt"))
	s.placeOrder(form)
	page("order-sent-twice", s.get(orderPath))
	form.Set("qty-"+ids[0], "2")
	page("form-changed", s.post("/orders", form))
	page("orders", s.get("/orders"))
	page("account", s.get("/account"))
	passwordPage := s.get("/account/password")
	page("password", passwordPage)
	change := url.Values{"idempotency_key": {formKey(t, passwordPage)}, "current_password": {"not my password"}, "new_password": {"a new password"}}
	page("password-wrong", s.post("/account/password", change))
	change.Set("current_password", webPassword)
	page("password-changed", s.post("/account/password", change))

	s.post(orderPath+"/refund-requests", url.Values{"idempotency_key": {keyOfForm(t, s.get(orderPath), orderPath+"/refund-requests")}, "reason": {"Arrived broken"}})
	page("order-refund-requested", s.get(orderPath))
	staff, _ := e.staffToken("staff@example.com")
	e.staffRefund(staff, orderPath, "part", `{"amount_cents":150}`)
	page("order-partly-refunded", s.get(orderPath))
	e.staffRefund(staff, orderPath, "rest", `{"reason":"Changed my mind"}`)
	page("order-refunded", s.get(orderPath))
	page("receipt-refunded", s.get(orderPath+"/receipt"))
	cancelled := s.placeOrder(s.checkout(ids[0], 1))
	s.post(cancelled+"/cancel", url.Values{"idempotency_key": {keyOfForm(t, s.get(cancelled), cancelled+"/cancel")}})
	page("order-cancelled", s.get(cancelled))
	page("account-refunds", s.get("/account"))
	waiting := s.placeOrder(s.checkout(ids[0], 1))
	authPage := s.post(waiting+"/payments", s.payForm(waiting, payments.MethodAuthentication)).Header.Get("Location")
	page("authenticate", s.get(authPage))
	page("order-authenticate", s.get(waiting))

	page("staff-not-found", s.get("/staff"))
	e.makeStaff("ann@example.com")
	page("staff-orders", s.get("/staff"))
	page("staff-orders-invalid", s.get("/staff?status=lost"))
	page("staff-order", s.get("/staff"+orderPath))
	page("staff-order-pending", s.get("/staff"+waiting))
	cancelled = "/staff" + s.placeOrder(s.checkout(ids[0], 1))
	s.post(cancelled+"/cancel", url.Values{"idempotency_key": {keyOfForm(t, s.get(cancelled), cancelled+"/cancel")}})
	page("staff-order-cancelled", s.get(cancelled))
	page("staff-products", s.get("/staff/products"))
	page("staff-restocked", s.post("/staff/products/stock", url.Values{"idempotency_key": {keyOfForm(t, s.get("/staff/products"), "/staff/products/stock")}, "sku": {"TEE-BLK-M"}, "stock": {"40"}}))
	doubt := s.placeOrder(s.checkout(ids[0], 1))
	lost.mu.Lock()
	lost.n = 1
	lost.mu.Unlock()
	s.post(doubt+"/payments", s.payForm(doubt, payments.MethodVisa))
	page("staff-in-doubt", s.get("/staff/in-doubt"))
	declined := paidOrder(t, s, ids[0], payments.MethodVisa)
	s.post(declined+"/refund-requests", url.Values{"idempotency_key": {keyOfForm(t, s.get(declined), declined+"/refund-requests")}})
	var open models.RefundRequest
	must(t, e.db.Take(&open, "state = ?", models.RequestOpen).Error)
	decline := "/staff" + declined + "/refund-requests/" + open.ID + "/decline"
	s.post(decline, staffForm(t, s, "/staff"+declined, decline, "reason", "Used for a month"))
	page("order-request-declined", s.get(declined))
	e.handleAll(notify.Webhooks{}, e.factEvents(), 1)
	page("staff-webhooks", s.get("/staff/webhooks"))

	cmd := exec.Command(java, append([]string{"-jar", vnu, "--format", "json", "--exit-zero-always"}, files...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("vnu: %v: %s", err, out)
	}
	var report struct {
		Messages []struct {
			Type, SubType, URL, Message, Extract string
			LastLine                             int
		}
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("vnu's report: %v: %s", err, out)
	}
	for _, m := range report.Messages {
		where := fmt.Sprintf("%s:%d", filepath.Base(m.URL), m.LastLine)
		if m.Type == "info" {
			t.Logf("%s: vnu %s: %s", where, m.SubType, m.Message)
			continue
		}
		t.Errorf("%s: vnu %s: %s (%q)", where, m.Type, m.Message, m.Extract)
	}
	t.Logf("vnu checked %d pages", len(files))
}
