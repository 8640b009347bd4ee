package tests

import (
	"net/http"
	"net/http/httptest"
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
	e := &env{t: t, url: srv.URL}
	for _, r := range []request{
		{method: "POST", path: "/api/v1/users", body: `{"email":"ann@example.com","password":"correct horse battery"}`, offContract: true},
		{method: "POST", path: "/api/v1/tokens", body: `{"email":"ann@example.com","password":"correct horse battery"}`, offContract: true},
		{method: "GET", path: "/api/v1/products", offContract: true},
		{method: "POST", path: "/api/v1/orders", token: "some-token", key: key("k"), body: `{"items":[]}`, offContract: true},
	} {
		got := e.do(r)
		if got.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: no Retry-After", r.method, r.path)
		}
		isProblem(t, got, http.StatusServiceUnavailable, "/problems/service-unavailable")
	}
	page := e.do(request{method: "GET", path: "/", header: http.Header{"Accept": {"text/html"}}})
	if page.Status != http.StatusServiceUnavailable || page.Header.Get("Retry-After") == "" || page.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("the catalog page: %d, Retry-After %q, %s", page.Status, page.Header.Get("Retry-After"), page.Header.Get("Content-Type"))
	}
}
