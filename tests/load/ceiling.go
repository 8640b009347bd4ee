package main

import (
	"io"
	"net/http"
	"net/http/httptest"
)

// ceilingPath is where the harness asks the ceiling; any path would do.
const ceilingPath = "/load-ceiling"

// ceilingOf answers every request with a copy of a (status, headers and
// body) once the shop has authenticated it: the shop is asked GET
// /api/v1/me with the request's Authorization, through its whole engine
// (its logging, metrics, recovery, security headers and bearer
// authentication), and that answer is dropped unless it refuses. What it
// serves is the ceiling of this stack for an answer of a's size: HTTP, Gin,
// the engine's middleware and authentication, with no idempotency and no
// business work but /me's small JSON, which makes the ceiling a little
// lower than the stack alone. It sends the engine's headers, as a route of
// the shop would.
func ceilingOf(shop http.Handler, a answer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		me := httptest.NewRequestWithContext(r.Context(), http.MethodGet, "/api/v1/me", nil)
		me.Header.Set("Authorization", r.Header.Get("Authorization"))
		auth := httptest.NewRecorder()
		shop.ServeHTTP(auth, me)
		if auth.Code != http.StatusOK {
			w.WriteHeader(auth.Code)
			return
		}
		for _, h := range []http.Header{auth.Header(), a.header} {
			for name, values := range h {
				w.Header()[name] = values
			}
		}
		w.WriteHeader(a.status)
		_, _ = w.Write(a.body)
	})
}
