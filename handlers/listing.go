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

// Page sizes of the listings.
const (
	defaultPageSize = 20
	maxPageSize     = 100
)

// cursor is where a page of a newest-first listing ended, sent to the
// client as an opaque string: the last row's creation time and id.
type cursor struct {
	at time.Time
	id string
}

func (c cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.at.UnixNano(), 10) + "." + c.id))
}

// pageQuery reads ?limit= and ?after=; valid says whether the cursor's id
// is one the listing could have made.
func pageQuery(c *gin.Context, valid func(id string) bool) (limit int, after *cursor, err error) {
	limit = defaultPageSize
	if s, ok := c.GetQuery("limit"); ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxPageSize {
			return 0, nil, problem.InvalidParameter.With(fmt.Sprintf("The limit must be a whole number from 1 to %d.", maxPageSize))
		}
		limit = n
	}
	s, ok := c.GetQuery("after")
	if !ok {
		return limit, nil, nil
	}
	after, ok = parseCursor(s, valid)
	if !ok {
		return 0, nil, problem.InvalidParameter.With("The after parameter must be a next_cursor this listing returned.")
	}
	return limit, after, nil
}

// parseCursor reads a cursor the listing made: base64 of "nanos.id", where
// nanos is a positive Unix time in nanoseconds and valid says whether the id
// is one of the listing's. Anything else — including a number out of range
// for the database, and base64 the listing would not write (the decoder
// skips CR and LF even when strict) — is not a cursor.
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

// nextURL is the address of the page after next, with the query's other
// parameters (a listing's filters) kept.
func nextURL(c *gin.Context, next cursor, limit int) string {
	q := c.Request.URL.Query()
	q.Set("after", next.String())
	q.Del("limit")
	if limit != defaultPageSize {
		q.Set("limit", strconv.Itoa(limit))
	}
	return c.Request.URL.Path + "?" + q.Encode()
}

// writePage answers one page of a listing under name, with next_cursor
// (null on the last page) and, when there is a next page, a Link to it.
func writePage(c *gin.Context, name string, items any, next *cursor, limit int) {
	var nextCursor *string
	if next != nil {
		s := next.String()
		nextCursor = &s
		c.Header("Link", fmt.Sprintf(`<%s>; rel="next"`, nextURL(c, *next, limit)))
	}
	c.JSON(http.StatusOK, gin.H{name: items, "next_cursor": nextCursor})
}

// isUUID: an order's id, in the one form the listing writes.
func isUUID(id string) bool { u, err := uuid.Parse(id); return err == nil && u.String() == id }

// isKeyID: a key's row id, which the database keeps as a signed 64-bit
// integer, written as the listing writes it.
func isKeyID(id string) bool {
	n, err := strconv.ParseInt(id, 10, 64)
	return err == nil && n > 0 && strconv.FormatInt(n, 10) == id
}

// readPage reads one page of a newest-first listing of rows named by a
// UUID, as the query asks (limit, after), with the cursor of the page after
// it, nil on the last: for the shopper's orders and for staff's.
func readPage[T any](c *gin.Context, read func(from *database.Position, limit int) ([]T, bool, error), at func(T) cursor) ([]T, *cursor, int, error) {
	limit, after, err := pageQuery(c, isUUID)
	if err != nil {
		return nil, nil, 0, err
	}
	var from *database.Position
	if after != nil {
		from = &database.Position{CreatedAt: after.at, ID: after.id}
	}
	page, more, err := read(from, limit)
	if err != nil || !more {
		return page, nil, limit, err
	}
	next := at(page[len(page)-1])
	return page, &next, limit, nil
}

// listKeys shows what the server remembers of the user's operations,
// newest first, a page at a time.
func (s *Server) listKeys(c *gin.Context) {
	limit, after, err := pageQuery(c, isKeyID)
	if err != nil {
		s.fail(c, err)
		return
	}
	var from *middleware.KeyPosition
	if after != nil {
		id, _ := strconv.ParseInt(after.id, 10, 64)
		from = &middleware.KeyPosition{CreatedAt: after.at, ID: uint(id)}
	}
	keys, more, err := s.idempotency.KeysPage(c.Request.Context(), currentUser(c).ID, from, limit)
	if err != nil {
		s.fail(c, err)
		return
	}
	out := make([]keyJSON, 0, len(keys))
	for _, k := range keys {
		out = append(out, keyView(k, s.deps.Now()))
	}
	var next *cursor
	if more {
		last := keys[len(keys)-1]
		next = &cursor{last.CreatedAt, strconv.FormatUint(uint64(last.ID), 10)}
	}
	writePage(c, "idempotency_keys", out, next, limit)
}
