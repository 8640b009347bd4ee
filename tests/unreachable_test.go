package tests

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/handlers"
	"github.com/shop/shop/payments"
)

// A database the server cannot reach is its trouble for now, not a bug:
// the API answers 503 service-unavailable and the pages an error page,
// each with Retry-After, never 500. The database here is a PostgreSQL
// address where nothing listens, whatever TEST_DATABASE_URL names.
func TestUnreachableDatabaseAnswers503(t *testing.T) {
	db, err := gorm.Open(postgres.Open("postgres://shop@127.0.0.1:1/shop?sslmode=disable&connect_timeout=2"),
		&gorm.Config{DisableAutomaticPing: true, TranslateError: true})
	if err != nil {
		t.Fatal(err)
	}
	s := handlers.NewServer(handlers.Deps{DB: db, Payments: billing.New(billing.Config{DB: db, Provider: &payments.Simulated{DB: db}})})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	// Sent past the contract's check: openapi.yaml lists 503 in its
	// introduction only, not under each operation.
	plain := func(r request) response {
		req, _ := http.NewRequest(r.method, srv.URL+r.path, strings.NewReader(r.body))
		req.Header = r.header.Clone()
		if req.Header == nil {
			req.Header = http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k"}, "Authorization": {"Bearer some-token"}}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return response{Status: resp.StatusCode, Header: resp.Header, Body: body}
	}
	for _, r := range []request{
		{method: "POST", path: "/api/v1/users", body: `{"email":"ann@example.com","password":"correct horse battery"}`},
		{method: "POST", path: "/api/v1/tokens", body: `{"email":"ann@example.com","password":"correct horse battery"}`},
		{method: "GET", path: "/api/v1/products"},
		{method: "POST", path: "/api/v1/orders", body: `{"items":[]}`},
	} {
		got := plain(r)
		if got.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: no Retry-After", r.method, r.path)
		}
		isProblem(t, got, http.StatusServiceUnavailable, "/problems/service-unavailable")
	}
	page := plain(request{method: "GET", path: "/", header: http.Header{"Accept": {"text/html"}}})
	if page.Status != http.StatusServiceUnavailable || page.Header.Get("Retry-After") == "" || page.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("the catalog page: %d, Retry-After %q, %s", page.Status, page.Header.Get("Retry-After"), page.Header.Get("Content-Type"))
	}
}
