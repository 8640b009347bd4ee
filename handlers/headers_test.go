package handlers

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/database"
	"github.com/shop/shop/httpkit"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/payments"
)

// Every route the router serves — found by walking it, so a route added
// later is checked too — and the answers for an unknown path and a wrong
// method carry the security headers; the API reference gets its own policy,
// and no policy lets a script run from anywhere but the shop.
func TestEveryRouteCarriesTheSecurityHeaders(t *testing.T) {
	db := testkit.NewDB(t)
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	s := NewServer(Deps{DB: db, Payments: billing.New(billing.Config{DB: db, Provider: &payments.Simulated{DB: db}}), StripeWebhookSecret: "whsec_test"})
	params := regexp.MustCompile(`:[a-z_]+`)
	type probe struct{ method, path string }
	probes := []probe{{"GET", "/no-such-page"}, {"GET", "/api/v1/no-such-thing"}, {"PUT", "/"}}
	for _, route := range s.router.Routes() {
		path := params.ReplaceAllString(route.Path, "00000000-0000-4000-8000-000000000000")
		path = strings.Replace(path, "*file", "app.css", 1)
		probes = append(probes, probe{route.Method, path})
	}
	if len(probes) < 30 {
		t.Fatalf("only %d routes walked", len(probes))
	}
	for _, p := range probes {
		req := httptest.NewRequest(p.method, p.path, strings.NewReader(""))
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		want := httpkit.PagePolicy
		if p.path == "/docs/api" {
			want = httpkit.ReferencePolicy
		}
		h := w.Header()
		if h.Get("Content-Security-Policy") != want || h.Get("X-Content-Type-Options") != "nosniff" ||
			h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("%s %s (%d): headers %v", p.method, p.path, w.Code, h)
		}
	}
	for _, policy := range []string{httpkit.PagePolicy, httpkit.ReferencePolicy} {
		if !strings.Contains(policy, "default-src 'self';") || !strings.Contains(policy, "script-src 'self';") ||
			!strings.Contains(policy, "frame-ancestors 'none'") || strings.Contains(policy, "unsafe-eval") {
			t.Errorf("policy %q lets scripts run from elsewhere, or frames the shop", policy)
		}
	}
}

// The pages keep to the policy: every script of a template is a file of
// the shop's, and no template has an inline event handler, a javascript:
// URL or an inline style.
func TestTemplatesHaveNothingInline(t *testing.T) {
	script := regexp.MustCompile(`(?is)<script\b[^>]*>.*?</script>`)
	fromFile := regexp.MustCompile(`^<script src="/static/[a-z.]+"( defer)?></script>$`)
	inline := regexp.MustCompile(`(?i)\son[a-z]+\s*=|javascript:|\sstyle\s*=|<style`)
	files, err := filepath.Glob("../templates/*.html")
	if err != nil || len(files) == 0 {
		t.Fatalf("templates: %v %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range script.FindAll(b, -1) {
			if !fromFile.Match(tag) {
				t.Errorf("%s: %q is an inline script, which the Content-Security-Policy refuses", f, tag)
			}
		}
		if m := inline.Find(b); m != nil {
			t.Errorf("%s: %q is inline, which the Content-Security-Policy refuses", f, m)
		}
	}
}
