package tests

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// anotherOriginPage is the web app of clients/ts/browser/another-origin.ts:
// its module, the generated client it imports, and openapi-fetch's own ESM
// build, which the import map names for the client's bare import.
const anotherOriginPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>A web app on another origin</title>
<script type="importmap">{"imports": {"openapi-fetch": "/node_modules/openapi-fetch/dist/index.mjs"}}</script>
<script type="module" src="/dist/browser/another-origin.js"></script>
</head><body></body></html>`

// pageReport is another-origin.ts's Report; seenAnswer its Seen, what a
// script could read of an answer (null: nothing).
type pageReport struct {
	Step, Error       string
	OrderID, ReplayID string
	Answers           []seenAnswer
}

type seenAnswer struct {
	Status                        int
	Replayed, Location, RequestID *string
}

// serveAnotherOrigin compiles clients/ts (tsc --strict) and serves the web
// app from a server of its own: http://127.0.0.1 on another port than the
// API's, so another origin, which it returns.
func serveAnotherOrigin(t *testing.T) string {
	t.Helper()
	dir := typeScriptClient(t)
	node(t, dir, nil, "node_modules/typescript/bin/tsc", "-p", "tsconfig.json", "--strict")
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte(anotherOriginPage))
		case strings.HasPrefix(r.URL.Path, "/dist/") || strings.HasPrefix(r.URL.Path, "/node_modules/openapi-fetch/dist/"):
			files.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// runAnotherOrigin opens the web app in Chromium with params and returns
// its report.
func runAnotherOrigin(t *testing.T, origin string, params url.Values) pageReport {
	t.Helper()
	ctx := newBrowser(t)
	must(t, chromedp.Do(ctx, chromedp.Navigate(origin+"/?"+params.Encode())))
	report, err := chromedp.Run(ctx, chromedp.Poll[pageReport]("window.report", chromedp.WithPollingInterval(20*time.Millisecond)))
	must(t, err)
	return report
}

// A web app served from another origin runs the generated TypeScript
// client (openapi-fetch) in Chromium, with the API's CORS_ORIGINS set.
//
// Listed, the app signs up, gets a token, places an order with an
// Idempotency-Key and sends it again with the same key: every call passes
// the browser's CORS checks, a preflight first, and the script reads
// Idempotent-Replayed, Location and X-Request-Id, which the API exposes.
// The database holds the one order the page read.
//
// Not listed (the list names http://localhost on the app's port, another
// origin than http://127.0.0.1's), with a valid token from the test: the
// preflight gets no Access-Control-Allow-Origin, so the browser's fetch
// fails, the order is never sent and nothing is written.
func TestTypeScriptClientFromAnotherOrigin(t *testing.T) {
	origin := serveAnotherOrigin(t)
	app, err := url.Parse(origin)
	must(t, err)
	t.Run("listed", func(t *testing.T) {
		e := newEnv(t, withCORS(origin))
		if origin == e.url {
			t.Fatalf("the app and the API share the origin %s", origin)
		}
		const email = "another-origin@example.com"
		report := runAnotherOrigin(t, origin, url.Values{"api": {e.url}, "email": {email}, "product": {e.products()[0]}})
		if report.Step != "done" || len(report.Answers) != 2 {
			t.Fatalf("the page stopped at %q: %s", report.Step, report.Error)
		}
		first, again := report.Answers[0], report.Answers[1]
		if first.Status != http.StatusCreated || first.Replayed != nil || again.Status != http.StatusCreated || deref(again.Replayed) != "true" {
			t.Fatalf("the page read the order as %d (Idempotent-Replayed %q) and its replay as %d (%q)", first.Status, deref(first.Replayed), again.Status, deref(again.Replayed))
		}
		if report.OrderID == "" || report.ReplayID != report.OrderID || deref(first.Location) != "/api/v1/orders/"+report.OrderID || deref(again.Location) != deref(first.Location) {
			t.Fatalf("the page read orders %q and %q at %q and %q", report.OrderID, report.ReplayID, deref(first.Location), deref(again.Location))
		}
		if deref(first.RequestID) == "" || deref(again.RequestID) == deref(first.RequestID) {
			t.Fatalf("the page read request ids %q and %q, want two", deref(first.RequestID), deref(again.RequestID))
		}
		var orders []string
		must(t, e.db.Table("orders").Where("user_id IN (?)", e.db.Table("users").Select("id").Where("email = ?", email)).Pluck("id", &orders).Error)
		if fx := e.sideEffects(); fx.users != 1 || fx.orders != 1 || fx.storedKeys != 1 || len(orders) != 1 || orders[0] != report.OrderID {
			t.Fatalf("the page's account has orders %v (the page read %s); the database has %d users, %d orders and %d stored keys, want 1 of each",
				orders, report.OrderID, fx.users, fx.orders, fx.storedKeys)
		}
	})
	t.Run("not listed", func(t *testing.T) {
		e := newEnv(t, withCORS("http://localhost:"+app.Port()))
		token := e.signUp("unlisted-origin@example.com")
		before := e.sideEffects()
		report := runAnotherOrigin(t, origin, url.Values{"api": {e.url}, "token": {token}, "product": {e.products()[0]}})
		if report.Step != "order" || !strings.Contains(report.Error, "Failed to fetch") {
			t.Fatalf("the page reached %q (%s); want its order's fetch to fail", report.Step, report.Error)
		}
		if fx := e.sideEffects(); fx != before || fx.orders != 0 || fx.keyRows != 0 {
			t.Fatalf("the refused page wrote: %+v, before %+v", fx, before)
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
