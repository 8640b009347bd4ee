package handlers

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/database"
	"github.com/shop/shop/httpkit"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/payments"
)

// The preflight allows exactly the methods of the API's routes — found by
// walking the router, so a route added later is checked too — and every
// one of those routes answers a listed origin's preflight itself, before
// its token or key is asked for; no route outside the API does.
func TestCORSAllowsEveryAPIMethod(t *testing.T) {
	db := testkit.NewDB(t)
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	const origin = "https://app.example.com"
	s := NewServer(Deps{DB: db, Payments: billing.New(billing.Config{DB: db, Provider: &payments.Simulated{DB: db}}), StripeWebhookSecret: "whsec_test", CORSOrigins: []string{origin}})
	params := regexp.MustCompile(`:[a-z_]+|\*[a-z_]+`)
	used := map[string]bool{}
	for _, route := range s.router.Routes() {
		api := strings.HasPrefix(route.Path, apiPrefix+"/")
		if api {
			used[route.Method] = true
		}
		req := httptest.NewRequest(http.MethodOptions, params.ReplaceAllString(route.Path, "00000000-0000-4000-8000-000000000000"), nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", route.Method)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		answered := w.Code == http.StatusNoContent && w.Header().Get("Access-Control-Allow-Origin") == origin
		if answered != api {
			t.Errorf("preflight of %s %s: %d, Access-Control-Allow-Origin %q; want it answered only under %s",
				route.Method, route.Path, w.Code, w.Header().Get("Access-Control-Allow-Origin"), apiPrefix)
		}
	}
	if methods := slices.Sorted(maps.Keys(used)); !slices.Equal(methods, slices.Sorted(slices.Values(httpkit.CORSMethods))) {
		t.Fatalf("the API's routes use %v, the preflight allows %v", methods, httpkit.CORSMethods)
	}
}
