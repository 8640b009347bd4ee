package handlers

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
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

// listKeys shows what the server remembers of the user's operations.
func (s *Server) listKeys(c *gin.Context) {
	keys, err := s.recentKeys(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"idempotency_keys": keys})
}

// recentKeys are the user's 100 most recent keys, for the API.
func (s *Server) recentKeys(c *gin.Context) ([]keyJSON, error) {
	keys, err := s.idempotency.Keys(c.Request.Context(), currentUser(c).ID, 100)
	if err != nil {
		return nil, err
	}
	out := make([]keyJSON, 0, len(keys))
	for _, k := range keys {
		v := keyJSON{Key: k.Key, Method: k.Method, Route: k.Route, State: k.State, Replays: k.Replays, CreatedAt: k.CreatedAt.UTC(), ExpiresAt: k.ExpiresAt.UTC()}
		if k.Lapsed(s.deps.Now()) { // released, or its lease passed: nobody holds it
			v.State = "released"
		}
		if k.Status != 0 {
			v.Status = &k.Status
		}
		out = append(out, v)
	}
	return out, nil
}
