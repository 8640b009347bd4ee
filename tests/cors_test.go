package tests

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// withCORS lets the pages of origins call the API (CORS_ORIGINS).
func withCORS(origins ...string) option {
	return func(deps *setup) { deps.CORSOrigins = origins }
}

// preflight is the request a browser sends before a cross-origin call
// with a token, a JSON body or a key: OPTIONS, with no token and no body.
func preflight(t *testing.T, url, origin, method string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodOptions, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", method)
	req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,idempotency-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// corsHeaders is every Access-Control-* header of an answer.
func corsHeaders(h http.Header) http.Header {
	found := http.Header{}
	for name, values := range h {
		if strings.HasPrefix(name, "Access-Control-") {
			found[name] = values
		}
	}
	return found
}

// Over real HTTP: a listed origin's preflights are answered before the
// token and the key are checked, with the methods and headers the API
// takes, and its answers, replays included, expose the headers a client
// reads. An origin not on the list, or any origin when the list is empty,
// gets no Access-Control-* header at all, preflight or answer: the server
// answers as it would without CORS, and the browser keeps the answer from
// the page. Preflights write nothing; each case's one order is written once.
func TestCORSAnswersOnlyListedOrigins(t *testing.T) {
	const listed = "http://app.example.com:8443"
	cases := []struct {
		name    string
		origins []string
		origin  string
		allowed bool
	}{
		{"listed origin", []string{"https://other.example.com", listed}, listed, true},
		{"origin not on the list", []string{"https://other.example.com"}, listed, false},
		{"empty list", nil, listed, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, withCORS(tc.origins...))
			token := e.signUp("cors@example.com")
			for route, method := range map[string]string{"/api/v1/orders": "POST", "/api/v1/tokens/current": "DELETE", "/api/v1/orders/" + uuid.NewString(): "GET"} {
				resp := preflight(t, e.url+route, tc.origin, method)
				got := corsHeaders(resp.Header)
				if !tc.allowed {
					if len(got) > 0 || resp.StatusCode != http.StatusMethodNotAllowed {
						t.Errorf("preflight of %s %s: %d %v; want the API's 405 and no Access-Control-* header", method, route, resp.StatusCode, got)
					}
					continue
				}
				want := http.Header{
					"Access-Control-Allow-Origin":  {tc.origin},
					"Access-Control-Allow-Methods": {"GET,POST,DELETE"},
					"Access-Control-Allow-Headers": {"Authorization,Content-Type,Idempotency-Key,X-Request-Id"},
					"Access-Control-Max-Age":       {"600"},
				}
				if resp.StatusCode != http.StatusNoContent || !maps.EqualFunc(got, want, slices.Equal) {
					t.Errorf("preflight of %s %s: %d %v; want 204 %v (no credentials)", method, route, resp.StatusCode, got, want)
				}
			}
			if fx := e.sideEffects(); fx.orders != 0 || fx.keyRows != 0 {
				t.Fatalf("the preflights wrote %d orders and %d keys", fx.orders, fx.keyRows)
			}

			k := uuid.NewString()
			order := request{method: "POST", path: "/api/v1/orders", token: token, key: &k,
				body: orderBody(e.products()[0], 1), header: http.Header{"Origin": {tc.origin}}}
			first, again := e.do(order), e.do(order)
			if first.Status != http.StatusCreated || again.Status != http.StatusCreated || first.replayed() || !again.replayed() {
				t.Fatalf("order and replay: %d (replayed %v), %d (replayed %v)", first.Status, first.replayed(), again.Status, again.replayed())
			}
			for _, answer := range []response{first, again} {
				got := corsHeaders(answer.Header)
				want := http.Header{}
				if tc.allowed {
					want = http.Header{
						"Access-Control-Allow-Origin":   {tc.origin},
						"Access-Control-Expose-Headers": {"Idempotent-Replayed,Retry-After,Location,Link,X-Request-Id"},
					}
				}
				if !maps.EqualFunc(got, want, slices.Equal) {
					t.Errorf("answer (replayed %v): %v; want %v", answer.replayed(), got, want)
				}
			}
			if tc.allowed && (!strings.Contains(first.Header.Get("Vary"), "Origin") || !strings.Contains(again.Header.Get("Vary"), "Origin")) {
				t.Errorf("answers vary by origin, but say Vary: %q and %q", first.Header.Get("Vary"), again.Header.Get("Vary"))
			}
			if fx := e.sideEffects(); fx.orders != 1 || fx.storedKeys != 1 {
				t.Fatalf("one order placed and replayed wrote %d orders and %d stored keys", fx.orders, fx.storedKeys)
			}

			// The pages are the shop's own: never open to another origin.
			for _, page := range []string{"/", "/login"} {
				req, _ := http.NewRequest(http.MethodGet, e.url+page, nil)
				req.Header.Set("Origin", tc.origin)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if got := corsHeaders(resp.Header); resp.StatusCode != http.StatusOK || len(got) > 0 {
					t.Errorf("GET %s from %s: %d %v; want 200 and no Access-Control-* header", page, tc.origin, resp.StatusCode, got)
				}
				if resp := preflight(t, e.url+page, tc.origin, "POST"); len(corsHeaders(resp.Header)) > 0 {
					t.Errorf("preflight of POST %s: %v; want no Access-Control-* header", page, corsHeaders(resp.Header))
				}
			}
		})
	}
}
