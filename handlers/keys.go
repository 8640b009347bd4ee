package handlers

import (
	"time"

	"github.com/shop/shop/middleware"
)

type keyJSON struct {
	Key       string    `json:"key"`
	Method    string    `json:"method"`
	Route     string    `json:"route"`
	State     string    `json:"state"`
	Status    *int      `json:"status"`
	Replays   int       `json:"replays"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// keyView is a key as the listing shows it: released when nobody holds it,
// its lease having passed included.
func keyView(k middleware.IdempotencyKey, now time.Time) keyJSON {
	v := keyJSON{Key: k.Key, Method: k.Method, Route: k.Route, State: k.State, Replays: k.Replays, CreatedAt: k.CreatedAt.UTC(), ExpiresAt: k.ExpiresAt.UTC()}
	if k.Lapsed(now) {
		v.State = "released"
	}
	if k.Status != 0 {
		v.Status = &k.Status
	}
	return v
}
