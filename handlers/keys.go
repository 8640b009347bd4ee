package handlers

import (
	"time"

	"github.com/gin-gonic/gin"

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

func keyView(k middleware.IdempotencyKey) keyJSON {
	v := keyJSON{Key: k.Key, Method: k.Method, Route: k.Route, State: k.State, Replays: k.Replays, CreatedAt: k.CreatedAt.UTC(), ExpiresAt: k.ExpiresAt.UTC()}
	if k.Released() {
		v.State = "released"
	}
	if k.Status != 0 {
		v.Status = &k.Status
	}
	return v
}

// recentKeys are the user's 100 most recent keys, for the page.
func (s *Server) recentKeys(c *gin.Context) ([]keyJSON, error) {
	keys, err := s.idempotency.Keys(c.Request.Context(), currentUser(c).ID, 100)
	if err != nil {
		return nil, err
	}
	out := make([]keyJSON, 0, len(keys))
	for _, k := range keys {
		out = append(out, keyView(k))
	}
	return out, nil
}
