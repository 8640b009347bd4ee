package handlers

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shop/shop/database"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/problem"
)

const (
	defaultPageSize = 20
	maxPageSize     = 100
)

// cursor is where a newest-first page ended: its last row's time and id.
type cursor struct {
	at time.Time
	id string
}

func (c cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.at.UnixNano(), 10) + "." + c.id))
}

// readPage reads a page of a newest-first listing as the query asks (limit,
// after: a cursor whose id valid accepts), and the next page's cursor.
func readPage[T any](c *gin.Context, valid func(id string) bool, read func(from *database.Position, limit int) ([]T, bool, error),
	at func(T) cursor) ([]T, *cursor, int, error) {
	limit := defaultPageSize
	if s, ok := c.GetQuery("limit"); ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxPageSize {
			return nil, nil, 0, problem.InvalidParameter.With(fmt.Sprintf("The limit must be a whole number from 1 to %d.", maxPageSize))
		}
		limit = n
	}
	var from *database.Position
	if s, ok := c.GetQuery("after"); ok {
		after, ok := parseCursor(s, valid)
		if !ok {
			return nil, nil, 0, problem.InvalidParameter.With("The after parameter must be a next_cursor this listing returned.")
		}
		from = &database.Position{CreatedAt: after.at, ID: after.id}
	}
	page, more, err := read(from, limit)
	if err != nil || !more {
		return page, nil, limit, err
	}
	next := at(page[len(page)-1])
	return page, &next, limit, nil
}

// parseCursor reads only a cursor the listing made, base64 of "nanos.id": no number
// out of range, no base64 it would not write (even strict, the decoder skips CR, LF).
func parseCursor(s string, valid func(id string) bool) (*cursor, bool) {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || base64.RawURLEncoding.EncodeToString(raw) != s {
		return nil, false
	}
	nanos, id, found := strings.Cut(string(raw), ".")
	n, err := strconv.ParseInt(nanos, 10, 64)
	if !found || err != nil || n <= 0 || strconv.FormatInt(n, 10) != nanos || !valid(id) {
		return nil, false
	}
	return &cursor{time.Unix(0, n).UTC(), id}, true
}

// nextURL is the next page's address, the listing's filters kept; "" after the last.
func nextURL(c *gin.Context, next *cursor, limit int) string {
	if next == nil {
		return ""
	}
	q := c.Request.URL.Query()
	q.Set("after", next.String())
	q.Del("limit")
	if limit != defaultPageSize {
		q.Set("limit", strconv.Itoa(limit))
	}
	return c.Request.URL.Path + "?" + q.Encode()
}

// pageJSON is a page's answer under name, with next_cursor; it sets the Link to the next.
func pageJSON[T, J any](c *gin.Context, name string, rows []T, view func(T) J, next *cursor, limit int) gin.H {
	var nextCursor *string
	if next != nil {
		s := next.String()
		nextCursor = &s
		c.Header("Link", fmt.Sprintf(`<%s>; rel="next"`, nextURL(c, next, limit)))
	}
	return gin.H{name: each(rows, view), "next_cursor": nextCursor}
}

// each is rows as view shows them: a JSON array, never null.
func each[T, J any](rows []T, view func(T) J) []J {
	out := make([]J, 0, len(rows))
	for _, r := range rows {
		out = append(out, view(r))
	}
	return out
}

// isUUID: an order's id, in the one form the listing writes.
func isUUID(id string) bool { u, err := uuid.Parse(id); return err == nil && u.String() == id }

// isKeyID: a key's row id, a positive signed 64-bit integer as the listing writes it.
func isKeyID(id string) bool {
	n, err := strconv.ParseInt(id, 10, 64)
	return err == nil && n > 0 && strconv.FormatInt(n, 10) == id
}

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

// listKeys is what the server remembers of the user's operations, newest
// first; a key nobody holds, its lease passed included, is released.
func (s *Server) listKeys(c *gin.Context) {
	keys, next, limit, err := readPage(c, isKeyID, func(from *database.Position, limit int) ([]middleware.IdempotencyKey, bool, error) {
		var at *middleware.KeyPosition
		if from != nil {
			id, _ := strconv.ParseUint(from.ID, 10, 64)
			at = &middleware.KeyPosition{CreatedAt: from.CreatedAt, ID: uint(id)}
		}
		return s.idempotency.KeysPage(c.Request.Context(), currentUser(c).ID, at, limit)
	}, func(k middleware.IdempotencyKey) cursor {
		return cursor{k.CreatedAt, strconv.FormatUint(uint64(k.ID), 10)}
	})
	now := s.deps.Now()
	s.reply(c, err, http.StatusOK, pageJSON(c, "idempotency_keys", keys, func(k middleware.IdempotencyKey) keyJSON {
		v := keyJSON{Key: k.Key, Method: k.Method, Route: k.Route, State: k.State, Replays: k.Replays, CreatedAt: k.CreatedAt.UTC(), ExpiresAt: k.ExpiresAt.UTC()}
		if k.Lapsed(now) {
			v.State = "released"
		}
		if k.Status != 0 {
			v.Status = &k.Status
		}
		return v
	}, next, limit))
}
