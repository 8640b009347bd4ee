package tests

import (
	"bytes"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/shop/shop/static"
)

// /docs/api is the API reference: Redoc, vendored and embedded, rendering
// the served document.
func TestAPIReferencePage(t *testing.T) {
	e := newEnv(t)
	page := e.do(request{method: "GET", path: "/docs/api"})
	if page.Status != http.StatusOK || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(page.Body), `<redoc spec-url="/openapi.json">`) || !strings.Contains(string(page.Body), `<script src="/static/redoc.standalone.js">`) {
		t.Fatalf("/docs/api: %d %q %s", page.Status, page.Header.Get("Content-Type"), page.Body)
	}
	vendored, err := fs.ReadFile(static.FS, "redoc.standalone.js")
	if err != nil || !bytes.Contains(vendored, []byte(`" ReDoc Version: ","2.5.4"`)) {
		t.Fatalf("vendored Redoc is not 2.5.4: %v", err)
	}
	// The copy is npm's, byte for byte, wherever `npm ci` has run (.ci/run runs it).
	if npm, err := os.ReadFile("../node_modules/redoc/bundles/redoc.standalone.js"); err == nil && !bytes.Equal(npm, vendored) {
		t.Fatal("static/redoc.standalone.js differs from node_modules/redoc/bundles/redoc.standalone.js")
	}
	script := e.do(request{method: "GET", path: "/static/redoc.standalone.js"})
	if script.Status != http.StatusOK || !bytes.Equal(script.Body, vendored) {
		t.Fatalf("/static/redoc.standalone.js: %d, %d bytes, want the %d vendored", script.Status, len(script.Body), len(vendored))
	}
}

// In a real browser, the reference shows the document's operations, the
// latest ones included.
func TestAPIReferenceRendersInABrowser(t *testing.T) {
	ctx := newBrowser(t)
	e := newEnv(t)
	must(t, chromedp.Do(ctx, chromedp.Navigate(e.url+"/docs/api")))
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector(".api-content") !== null && document.body.innerText.includes("Revoke the token in use")`))
	must(t, err)
	// Redoc always renders Redocly's logo from its CDN in the sidebar's
	// footer, once mounted; the policy refuses it, as it should (no request
	// leaves for a third party), and the link shows its text alone. Any
	// other refusal would break the page.
	refused, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(window.cspViolations || []).filter(v => v !== "img-src refused https://cdn.redoc.ly/redoc/logo-mini.svg")`))
	must(t, err)
	if len(refused) > 0 {
		t.Errorf("/docs/api: the Content-Security-Policy refused %q", refused)
	}
	text, err := chromedp.Run(ctx, chromedp.Text("body"))
	must(t, err)
	for _, want := range []string{"Shop API", "Place an order", "Pay an order", "Idempotency-Key", "List my orders, newest first, a page at a time", "Get one payment of one of my orders"} {
		if !strings.Contains(text, want) {
			t.Errorf("the rendered reference does not show %q", want)
		}
	}
}
